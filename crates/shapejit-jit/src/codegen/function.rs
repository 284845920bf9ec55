//! Builds one kernel function in its own `JITModule` and finalizes it.
//!
//! **Invariant:** every kernel has the [`crate::kernel::EntryFn`] signature
//! `(inputs, outputs, outer, table)` and no relocations (no symbols; the only calls
//! go through the micro-kernel `table` it is passed), so its code depends only on its
//! own memory and its arguments. A module whose compilation failed is freed before
//! the error is returned.

use std::time::Instant;

use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use crate::error::JitError;
use crate::isa::native_isa;
use crate::kernel::{CompiledCode, EntryFn};

/// The entry block's parameters, plus loaders for the buffer pointers.
pub(crate) struct Params {
    /// `*const *const f32`
    pub(crate) inputs: Value,
    /// `*const *mut f32`
    pub(crate) outputs: Value,
    /// runtime outer dim (family kernels)
    pub(crate) outer: Value,
    /// `*const shapejit_kernels::micro::Table`: the micro-kernels tiled code calls
    pub(crate) table: Value,
    /// the calling convention of the micro-kernels (`extern "C"`)
    pub(crate) call_conv: CallConv,
}

impl Params {
    /// Loads the pointer of input `idx`.
    pub(crate) fn input_ptr(&self, b: &mut FunctionBuilder, idx: usize) -> Value {
        load_ptr(b, self.inputs, idx)
    }

    /// Loads the pointer of output `idx`.
    pub(crate) fn output_ptr(&self, b: &mut FunctionBuilder, idx: usize) -> Value {
        load_ptr(b, self.outputs, idx)
    }
}

fn load_ptr(b: &mut FunctionBuilder, array: Value, idx: usize) -> Value {
    // Invariant: specs are validated to have far fewer than 2^28 buffers.
    let offset = (idx * 8) as i32;
    b.ins()
        .load(I64, MemFlagsData::trusted().with_readonly(), array, offset)
}

/// Compiles one function whose body `emit` writes; `emit` leaves the builder in the
/// block that falls through to the function's return.
pub(crate) fn compile_function(
    name: &str,
    emit: impl FnOnce(&mut FunctionBuilder, &Params),
) -> Result<CompiledCode, JitError> {
    let start = Instant::now();
    let isa = native_isa()?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    match define(&mut module, name, emit) {
        Ok((entry, code_bytes)) => Ok(CompiledCode::new(
            name.to_string(),
            module,
            entry,
            code_bytes,
            start.elapsed(),
        )),
        Err(err) => {
            // SAFETY: nothing from this module was ever called or handed out.
            unsafe { module.free_memory() };
            Err(err)
        }
    }
}

fn define(
    module: &mut JITModule,
    name: &str,
    emit: impl FnOnce(&mut FunctionBuilder, &Params),
) -> Result<(EntryFn, usize), JitError> {
    let codegen_err = |message: String| JitError::Codegen {
        kernel: name.to_string(),
        message,
    };
    let mut sig = module.make_signature();
    for _ in 0..4 {
        sig.params.push(AbiParam::new(I64));
    }
    let call_conv = sig.call_conv;
    let func_id = module
        .declare_function(name, Linkage::Local, &sig)
        .map_err(|e| codegen_err(e.to_string()))?;
    let mut ctx = module.make_context();
    ctx.func.signature = sig;
    let frontend_config = module.target_config();
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry);
        let params = Params {
            inputs: p[0],
            outputs: p[1],
            outer: p[2],
            table: p[3],
            call_conv,
        };
        emit(&mut b, &params);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(frontend_config);
    }
    module
        .define_function(func_id, &mut ctx)
        .map_err(|e| codegen_err(format!("{e:?}")))?;
    let code_bytes = ctx
        .compiled_code()
        .map(|c| c.code_info().total_size as usize)
        .ok_or_else(|| codegen_err("no compiled code after define_function".to_string()))?;
    module.clear_context(&mut ctx);
    module
        .finalize_definitions()
        .map_err(|e| codegen_err(e.to_string()))?;
    let ptr = module.get_finalized_function(func_id);
    // SAFETY: the function was declared with the EntryFn signature above (four I64
    // params, no returns, the ISA's default call convention, which is SysV = extern "C"
    // on x86_64 Linux) and finalized, so the pointer is executable code of that type.
    let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(ptr) };
    Ok((entry, code_bytes))
}
