//! Compile-time properties of the API types.

use shapejit::{Module, Runtime};

fn send_sync<T: Send + Sync>() {}
fn send<T: Send>() {}

#[test]
fn module_is_send_sync_clone_and_runtime_is_send() {
    send_sync::<Module>();
    send::<Runtime>();
    fn clone<T: Clone>() {}
    clone::<Module>();
}
