//! Typed access to a node's attributes, with bookkeeping of which were read.
//!
//! **Invariant:** after an op is mapped, every attribute of the node has been
//! read or explicitly ignored ([`Attrs::unread`] is empty); an attribute the
//! mapping does not know is reported as unsupported instead of being dropped
//! silently.

use crate::proto::{AttributeProto, GraphProto, TensorProto, attribute_type};
use std::cell::Cell;

/// The attributes of one node.
pub struct Attrs<'a> {
    list: &'a [AttributeProto],
    read: Vec<Cell<bool>>,
}

/// An attribute whose value has the wrong type: (name, expected type).
#[derive(Debug)]
pub struct AttrTypeError {
    /// attribute name
    pub name: String,
    /// what was expected
    pub expected: &'static str,
}

type AttrResult<T> = Result<Option<T>, AttrTypeError>;

impl<'a> Attrs<'a> {
    /// Wraps a node's attribute list.
    pub fn new(list: &'a [AttributeProto]) -> Attrs<'a> {
        Attrs {
            list,
            read: list.iter().map(|_| Cell::new(false)).collect(),
        }
    }

    fn find(&self, name: &str) -> Option<&'a AttributeProto> {
        let idx = self.list.iter().position(|a| a.name == name)?;
        self.read[idx].set(true);
        Some(&self.list[idx])
    }

    /// Marks an attribute as understood without reading it.
    pub fn ignore(&self, name: &str) {
        let _ = self.find(name);
    }

    /// True when the node has the attribute (marks it read).
    pub fn has(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    fn typed<T>(
        &self,
        name: &str,
        ty: i32,
        expected: &'static str,
        get: impl FnOnce(&'a AttributeProto) -> T,
    ) -> AttrResult<T> {
        match self.find(name) {
            None => Ok(None),
            // Very old files leave `type` unset (0); trust the field then.
            Some(a) if a.r#type == ty || a.r#type == 0 => Ok(Some(get(a))),
            Some(_) => Err(AttrTypeError {
                name: name.to_string(),
                expected,
            }),
        }
    }

    /// An `INT` attribute.
    pub fn int(&self, name: &str) -> AttrResult<i64> {
        self.typed(name, attribute_type::INT, "an int", |a| a.i)
    }

    /// A `FLOAT` attribute.
    pub fn float(&self, name: &str) -> AttrResult<f32> {
        self.typed(name, attribute_type::FLOAT, "a float", |a| a.f)
    }

    /// A `STRING` attribute (lossy UTF-8).
    pub fn string(&self, name: &str) -> AttrResult<String> {
        self.typed(name, attribute_type::STRING, "a string", |a| {
            String::from_utf8_lossy(&a.s).into_owned()
        })
    }

    /// A `STRINGS` attribute (lossy UTF-8).
    pub fn strings(&self, name: &str) -> AttrResult<Vec<String>> {
        self.typed(name, attribute_type::STRINGS, "a list of strings", |a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }

    /// An `INTS` attribute.
    pub fn ints(&self, name: &str) -> AttrResult<Vec<i64>> {
        self.typed(name, attribute_type::INTS, "a list of ints", |a| {
            a.ints.clone()
        })
    }

    /// A `FLOATS` attribute.
    pub fn floats(&self, name: &str) -> AttrResult<Vec<f32>> {
        self.typed(name, attribute_type::FLOATS, "a list of floats", |a| {
            a.floats.clone()
        })
    }

    /// A `TENSOR` attribute.
    pub fn tensor(&self, name: &str) -> AttrResult<&'a TensorProto> {
        match self.typed(name, attribute_type::TENSOR, "a tensor", |a| a.t.as_ref())? {
            Some(Some(t)) => Ok(Some(t)),
            Some(None) => Err(AttrTypeError {
                name: name.to_string(),
                expected: "a tensor",
            }),
            None => Ok(None),
        }
    }

    /// A `GRAPH` attribute.
    pub fn graph(&self, name: &str) -> AttrResult<&'a GraphProto> {
        match self.typed(name, attribute_type::GRAPH, "a graph", |a| a.g.as_ref())? {
            Some(Some(g)) => Ok(Some(g)),
            Some(None) => Err(AttrTypeError {
                name: name.to_string(),
                expected: "a graph",
            }),
            None => Ok(None),
        }
    }

    /// Names of attributes nobody read or ignored.
    pub fn unread(&self) -> Vec<&'a str> {
        self.list
            .iter()
            .zip(&self.read)
            .filter(|(_, r)| !r.get())
            .map(|(a, _)| a.name.as_str())
            .collect()
    }

    /// The first attribute that refers to a function-caller attribute, if any.
    pub fn reference(&self) -> Option<&'a str> {
        self.list
            .iter()
            .find(|a| !a.ref_attr_name.is_empty())
            .map(|a| a.name.as_str())
    }
}
