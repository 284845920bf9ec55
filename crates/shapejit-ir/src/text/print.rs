//! The `.sjir` printer (`impl Display for Graph`).
//!
//! **Invariant:** the output is canonical: every attribute is printed, in the
//! schema's order, every node output carries its type, and the parser reads it
//! back to a graph that prints identically.

use super::attrs::{AttrValue, attrs_of, subgraph_keywords};
use super::lexer::is_name_char;
use crate::dtype::DType;
use crate::graph::{Graph, Node, ValueId};
use crate::op::Op;
use crate::tensor::Tensor;
use std::fmt::{self, Write};

/// Constants with more elements than this print as hex bytes.
pub const MAX_LITERAL_ELEMS: usize = 16;

/// A name as written after `%` or `@`: bare when it is made of `[A-Za-z0-9_.]`,
/// else quoted with escapes.
pub(crate) fn quote_name(name: &str) -> String {
    if !name.is_empty() && name.chars().all(is_name_char) {
        return name.to_string();
    }
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Prints an f32 so that parsing the text gives the same bits (except NaN
/// payloads, which print as `NaN`).
fn float(v: f32) -> String {
    format!("{v:?}")
}

/// How constant data is printed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Data {
    /// every constant exactly (parseable)
    Full,
    /// large constants as `<elided N x dtype>` (not parseable)
    Elided,
}

/// ` {name = value, ...}` for an op with attributes, nothing otherwise.
fn write_attrs(out: &mut String, op: &Op, data: Data) {
    let attrs = attrs_of(op);
    if attrs.is_empty() {
        return;
    }
    out.push_str(" {");
    for (i, (name, v)) in attrs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{name} = ");
        attr_value(out, v, data);
    }
    out.push('}');
}

/// An op's attributes as `.sjir` prints them: ` {axis = -1, epsilon = 1e-5}`, or ""
/// for an op without attributes (large tensor attributes elided). Bytecode listings
/// use it, so both texts spell attributes alike.
pub fn op_attrs(op: &Op) -> String {
    let mut out = String::new();
    write_attrs(&mut out, op, Data::Elided);
    out
}

/// Writes a tensor literal: `f32[2] [1.0, 2.0]`, `f32[64] hex"..."`.
fn tensor_literal(out: &mut String, t: &Tensor, data: Data) {
    let _ = write!(
        out,
        "{}{}",
        t.dtype(),
        crate::shape::Shape::known(t.shape())
    );
    // other dtypes print as hex, which round-trips every value exactly
    let literal = matches!(
        t.dtype(),
        DType::F32 | DType::I32 | DType::I64 | DType::Bool
    );
    let small = t.numel() <= MAX_LITERAL_ELEMS;
    let has_nan = t
        .as_slice::<f32>()
        .is_ok_and(|s| s.iter().any(|v| v.is_nan()));
    if small && literal && !has_nan {
        out.push_str(" [");
        let items: Vec<String> = match t.dtype() {
            DType::F32 => t
                .as_slice::<f32>()
                .map(|s| s.iter().map(|&v| float(v)).collect()),
            DType::I32 => t
                .as_slice::<i32>()
                .map(|s| s.iter().map(i32::to_string).collect()),
            DType::I64 => t
                .as_slice::<i64>()
                .map(|s| s.iter().map(i64::to_string).collect()),
            DType::Bool => t
                .as_slice::<bool>()
                .map(|s| s.iter().map(bool::to_string).collect()),
            _ => Ok(Vec::new()),
        }
        .unwrap_or_default();
        out.push_str(&items.join(", "));
        out.push(']');
    } else if data == Data::Elided && !small {
        let _ = write!(out, " <elided {} x {}>", t.numel(), t.dtype());
    } else {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.reserve(t.bytes().len() * 2 + 6);
        out.push_str(" hex\"");
        for &b in t.bytes().iter() {
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
        out.push('"');
    }
}

fn attr_value(out: &mut String, v: &AttrValue, data: Data) {
    match v {
        AttrValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        AttrValue::Float(f) => out.push_str(&float(*f)),
        AttrValue::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        AttrValue::Ints(list) => {
            let items: Vec<String> = list.iter().map(i64::to_string).collect();
            let _ = write!(out, "[{}]", items.join(", "));
        }
        AttrValue::Word(w) => out.push_str(w),
        AttrValue::Tensor(t) => tensor_literal(out, t, data),
    }
}

struct Printer<'a> {
    out: &'a mut String,
    data: Data,
}

impl Printer<'_> {
    fn value(&mut self, g: &Graph, id: ValueId) {
        self.out.push('%');
        let name = g
            .values
            .get(id.index())
            .map_or_else(|| format!("<bad {id:?}>"), |v| quote_name(&v.name));
        self.out.push_str(&name);
    }

    fn value_list(&mut self, g: &Graph, ids: &[ValueId]) {
        for (i, &id) in ids.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.value(g, id);
        }
    }

    fn graph(&mut self, g: &Graph, indent: usize) {
        let _ = write!(self.out, "graph @{}(", quote_name(&g.name));
        for (i, &id) in g.inputs.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.value(g, id);
            if let Some(v) = g.values.get(id.index()) {
                let _ = write!(self.out, ": {}", v.ty);
            }
        }
        self.out.push_str(") -> (");
        self.value_list(g, &g.outputs);
        self.out.push_str(") {\n");
        for node in &g.nodes {
            self.node(g, node, indent + 1);
        }
        self.indent(indent);
        self.out.push('}');
    }

    fn indent(&mut self, level: usize) {
        for _ in 0..level {
            self.out.push_str("  ");
        }
    }

    fn node(&mut self, g: &Graph, node: &Node, indent: usize) {
        self.indent(indent);
        if !node.outputs.is_empty() {
            self.value_list(g, &node.outputs);
            self.out.push_str(" = ");
        }
        self.out.push_str(node.op.name());
        let default_name = node
            .outputs
            .first()
            .and_then(|o| g.values.get(o.index()))
            .map_or("", |v| &v.name);
        if node.name != default_name {
            let _ = write!(self.out, " @{}", quote_name(&node.name));
        }
        if let Op::Constant { value } = &node.op {
            self.out.push(' ');
            tensor_literal(self.out, value, self.data);
            self.out.push('\n');
            return;
        }
        if !node.inputs.is_empty() {
            self.out.push(' ');
            self.value_list(g, &node.inputs);
        }
        write_attrs(self.out, &node.op, self.data);
        if !node.outputs.is_empty() {
            self.out.push_str(" : ");
            for (i, o) in node.outputs.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                match g.values.get(o.index()) {
                    Some(v) => {
                        let _ = write!(self.out, "{}", v.ty);
                    }
                    None => self.out.push_str("<bad value>"),
                }
            }
        }
        self.out.push('\n');
        for (keyword, sub) in subgraph_keywords(node.op.name())
            .iter()
            .zip(node.op.subgraphs())
        {
            self.indent(indent + 1);
            let _ = write!(self.out, "{keyword} ");
            self.graph(sub, indent + 1);
            self.out.push('\n');
        }
    }
}

/// Prints a graph in `.sjir` form.
pub(super) fn print_graph(g: &Graph, data: Data) -> String {
    let mut out = String::new();
    Printer {
        out: &mut out,
        data,
    }
    .graph(g, 0);
    out.push('\n');
    out
}

impl fmt::Display for Graph {
    /// The `.sjir` text; [`crate::text::parse`] reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_graph(self, Data::Full))
    }
}

/// A graph printed for humans, with large constants elided (see [`Graph::display_elided`]).
pub struct Elided<'a>(&'a Graph);

impl fmt::Display for Elided<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_graph(self.0, Data::Elided))
    }
}

impl Graph {
    /// The `.sjir` text with every constant of more than
    /// [`MAX_LITERAL_ELEMS`] elements shown as `<elided N x dtype>`.
    /// For reading only: the parser rejects elided constants.
    pub fn display_elided(&self) -> Elided<'_> {
        Elided(self)
    }
}
