//! The `.sjir` parser: tokens to a [`Graph`].
//!
//! Output types after `:` are optional; when left out, shape inference gives
//! them (so hand-written tests can omit them). When given, they are recorded
//! as written, even if inference disagrees: the verifier reports that.
//!
//! **Invariant:** every error is an [`IrError::Parse`] with the 1-based
//! line:column of the offending token and "expected X, found Y"; nesting is
//! bounded by [`crate::verify::MAX_NESTING`], so no input overflows the stack.

use super::attrs::{AttrError, AttrValue, Attrs, op_from, subgraph_keywords};
use super::lexer::{Tok, Token, tokenize};
use crate::dim::Dim;
use crate::dtype::DType;
use crate::error::IrError;
use crate::graph::{Graph, Node, ValueId, ValueInfo, ValueType};
use crate::infer::{InferCtx, infer, type_matches};
use crate::op::Op;
use crate::shape::Shape;
use crate::tensor::Tensor;
use crate::verify::MAX_NESTING;
use bytes::Bytes;
use std::collections::HashMap;

/// Parses `.sjir` text into a graph (not verified: call [`crate::verify()`]).
pub fn parse(text: &str) -> Result<Graph, IrError> {
    let tokens = tokenize(text)?;
    let mut p = Parser {
        src: text,
        tokens,
        pos: 0,
    };
    let g = p.graph(0)?;
    p.expect_eof()?;
    Ok(g)
}

type PResult<T> = Result<T, IrError>;

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
}

/// The graph being built: values by name, nodes, the inference context.
struct Scope {
    graph: Graph,
    names: HashMap<String, ValueId>,
    ctx: InferCtx,
}

impl Scope {
    fn define(&mut self, name: String, ty: ValueType, known: Option<Vec<Dim>>) -> ValueId {
        self.ctx
            .reserve(ty.shape.dims().iter().flat_map(Dim::symbols));
        let id = ValueId(self.graph.values.len() as u32);
        self.names.insert(name.clone(), id);
        self.graph.values.push(ValueInfo { name, ty, known });
        id
    }
}

impl Parser<'_> {
    fn tok(&self) -> &Token {
        // Invariant: the token list ends with Eof and `pos` never passes it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek(&self) -> &Tok {
        &self.tok().tok
    }

    fn peek2(&self) -> &Tok {
        &self.tokens[(self.pos + 1).min(self.tokens.len() - 1)].tok
    }

    fn next(&mut self) -> Token {
        let t = self.tok().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn error_at(t: &Token, message: String) -> IrError {
        IrError::Parse {
            line: t.line,
            column: t.column,
            message,
        }
    }

    fn expected(&self, what: &str) -> IrError {
        Parser::error_at(
            self.tok(),
            format!("expected {what}, found {}", self.peek().describe()),
        )
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.is_punct(p);
        if hit {
            self.next();
        }
        hit
    }

    fn expect_punct(&mut self, p: &str) -> PResult<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{p}'")))
        }
    }

    fn expect_keyword(&mut self, word: &str) -> PResult<()> {
        match self.peek() {
            Tok::Ident(w) if w == word => {
                self.next();
                Ok(())
            }
            _ => Err(self.expected(&format!("'{word}'"))),
        }
    }

    fn expect_eof(&mut self) -> PResult<()> {
        if *self.peek() == Tok::Eof {
            Ok(())
        } else {
            Err(self.expected("end of input"))
        }
    }

    fn graph(&mut self, depth: usize) -> PResult<Graph> {
        if depth > MAX_NESTING {
            return Err(Parser::error_at(
                self.tok(),
                format!("sub-graphs nest deeper than {MAX_NESTING} levels"),
            ));
        }
        self.expect_keyword("graph")?;
        let name = match self.next() {
            Token {
                tok: Tok::At(n), ..
            } => n,
            t => {
                return Err(Parser::error_at(
                    &t,
                    format!(
                        "expected '@' and the graph name, found {}",
                        t.tok.describe()
                    ),
                ));
            }
        };
        let mut scope = Scope {
            graph: Graph {
                name,
                ..Graph::default()
            },
            names: HashMap::new(),
            ctx: InferCtx::default(),
        };
        self.expect_punct("(")?;
        if !self.is_punct(")") {
            loop {
                let (tok, name) = self.value_name()?;
                self.expect_punct(":")?;
                let ty = self.value_type()?;
                if scope.names.contains_key(&name) {
                    return Err(Parser::error_at(
                        &tok,
                        format!("value '%{name}' is defined twice"),
                    ));
                }
                let id = scope.define(name, ty, None);
                scope.graph.inputs.push(id);
                if !self.eat_punct(",") {
                    break;
                }
            }
        }
        self.expect_punct(")")?;
        self.expect_punct("->")?;
        self.expect_punct("(")?;
        let mut outputs = Vec::new();
        if !self.is_punct(")") {
            outputs.push(self.value_name()?);
            while self.eat_punct(",") {
                outputs.push(self.value_name()?);
            }
        }
        self.expect_punct(")")?;
        self.expect_punct("{")?;
        while !self.is_punct("}") {
            self.statement(&mut scope, depth)?;
        }
        self.expect_punct("}")?;
        for (tok, name) in outputs {
            let id = Parser::lookup(&scope, &tok, &name)?;
            scope.graph.outputs.push(id);
        }
        Ok(scope.graph)
    }

    fn lookup(scope: &Scope, tok: &Token, name: &str) -> PResult<ValueId> {
        scope.names.get(name).copied().ok_or_else(|| {
            Parser::error_at(
                tok,
                format!(
                    "expected a defined value, found unknown value '%{}'",
                    super::print::quote_name(name)
                ),
            )
        })
    }

    fn value_name(&mut self) -> PResult<(Token, String)> {
        match self.peek().clone() {
            Tok::Value(n) => Ok((self.next(), n)),
            _ => Err(self.expected("a value name ('%name')")),
        }
    }

    fn value_list(&mut self) -> PResult<Vec<(Token, String)>> {
        let mut out = vec![self.value_name()?];
        while self.eat_punct(",") {
            out.push(self.value_name()?);
        }
        Ok(out)
    }

    fn dtype(&mut self) -> PResult<DType> {
        if let Tok::Ident(w) = self.peek()
            && let Some(d) = DType::from_name(w)
        {
            self.next();
            return Ok(d);
        }
        Err(self.expected("a dtype (f32, i32, i64, bool)"))
    }

    fn value_type(&mut self) -> PResult<ValueType> {
        let dtype = self.dtype()?;
        let shape = self.shape()?;
        Ok(ValueType { dtype, shape })
    }

    /// `[dim, dim, ...]`; each dim's source text goes to [`Dim::parse`].
    fn shape(&mut self) -> PResult<Shape> {
        self.expect_punct("[")?;
        let mut dims = Vec::new();
        if self.eat_punct("]") {
            return Ok(Shape(dims));
        }
        loop {
            let first = self.tok().clone();
            let mut depth = 0usize;
            let mut end = first.start;
            loop {
                match self.peek() {
                    Tok::Punct("," | "]") if depth == 0 => break,
                    Tok::Punct("(") => depth += 1,
                    Tok::Punct(")") => depth = depth.saturating_sub(1),
                    Tok::Eof | Tok::Punct("{" | "}" | "[") => break,
                    _ => {}
                }
                end = self.next().end;
            }
            if end == first.start {
                return Err(self.expected("a dim"));
            }
            let text = &self.src[first.start..end];
            let dim = Dim::parse(text).map_err(|e| {
                let column = first.column + text.get(..e.offset).map_or(0, |t| t.chars().count());
                IrError::Parse {
                    line: first.line,
                    column,
                    message: format!("bad dim '{text}': {}", e.message),
                }
            })?;
            dims.push(dim);
            if self.eat_punct("]") {
                return Ok(Shape(dims));
            }
            self.expect_punct(",")?;
        }
    }

    fn statement(&mut self, scope: &mut Scope, depth: usize) -> PResult<()> {
        let outputs = if matches!(self.peek(), Tok::Value(_)) {
            let outs = self.value_list()?;
            self.expect_punct("=")?;
            outs
        } else {
            Vec::new()
        };
        let op_tok = self.next();
        let Tok::Ident(op_name) = op_tok.tok.clone() else {
            return Err(Parser::error_at(
                &op_tok,
                format!("expected an op name, found {}", op_tok.tok.describe()),
            ));
        };
        let node_name = match self.peek().clone() {
            Tok::At(n) => {
                self.next();
                Some(n)
            }
            _ => None,
        };
        let mut inputs = Vec::new();
        let mut raw_attrs = Vec::new();
        let literal = if op_name == "constant" {
            Some(self.tensor_literal()?)
        } else {
            if matches!(self.peek(), Tok::Value(_)) {
                for (tok, name) in self.value_list()? {
                    inputs.push(Parser::lookup(scope, &tok, &name)?);
                }
            }
            raw_attrs = self.attributes()?;
            None
        };
        let types = if self.is_punct(":") {
            let colon = self.next();
            let mut tys = vec![self.value_type()?];
            while self.eat_punct(",") {
                tys.push(self.value_type()?);
            }
            Some((colon, tys))
        } else {
            None
        };
        let op = match literal {
            Some(value) => Op::Constant { value },
            None => {
                let mut subgraphs = Vec::new();
                for kw in subgraph_keywords(&op_name) {
                    self.expect_keyword(kw)?;
                    subgraphs.push(self.graph(depth + 1)?);
                }
                let input_types: Vec<&ValueType> =
                    inputs.iter().map(|&i| &scope.graph.value(i).ty).collect();
                let (toks, attrs): (Vec<Token>, Vec<(String, AttrValue)>) =
                    raw_attrs.into_iter().unzip();
                op_from(&op_name, Attrs::new(attrs), &input_types, subgraphs).map_err(
                    |AttrError { index, message }| {
                        Parser::error_at(
                            index.and_then(|i| toks.get(i)).unwrap_or(&op_tok),
                            message,
                        )
                    },
                )?
            }
        };
        self.finish_node(
            scope,
            NodeParts {
                op_tok,
                op,
                inputs,
                outputs,
                node_name,
                types,
            },
        )
    }

    /// `{name = value, ...}` (optional), each with its name token.
    fn attributes(&mut self) -> PResult<Vec<(Token, (String, AttrValue))>> {
        let mut out = Vec::new();
        if !self.eat_punct("{") {
            return Ok(out);
        }
        if !self.is_punct("}") {
            loop {
                let tok = self.tok().clone();
                let Tok::Ident(name) = tok.tok.clone() else {
                    return Err(self.expected("an attribute name"));
                };
                self.next();
                self.expect_punct("=")?;
                let value = self.attr_value()?;
                out.push((tok, (name, value)));
                if !self.eat_punct(",") {
                    break;
                }
            }
        }
        self.expect_punct("}")?;
        Ok(out)
    }

    /// Records a node: output names, recorded types, known contents.
    fn finish_node(&mut self, scope: &mut Scope, parts: NodeParts) -> PResult<()> {
        let NodeParts {
            op_tok,
            op,
            inputs,
            outputs,
            node_name,
            types,
        } = parts;
        let name = node_name
            .unwrap_or_else(|| outputs.first().map(|(_, n)| n.clone()).unwrap_or_default());
        let infos: Vec<&ValueInfo> = inputs.iter().map(|&i| scope.graph.value(i)).collect();
        let inferred = infer(&op, &infos, &mut scope.ctx);
        let recorded: Vec<(ValueType, Option<Vec<Dim>>)> = match (types, inferred) {
            (Some((colon, tys)), inferred) => {
                if tys.len() != outputs.len() {
                    let msg = format!(
                        "expected {} output types, found {}",
                        outputs.len(),
                        tys.len()
                    );
                    return Err(Parser::error_at(&colon, msg));
                }
                let inferred = inferred.ok().filter(|i| i.len() == tys.len());
                tys.into_iter()
                    .enumerate()
                    .map(|(k, ty)| {
                        let known = inferred.as_ref().and_then(|inf| {
                            type_matches(&ty, &inf[k].ty, &scope.ctx)
                                .then(|| inf[k].known.clone())
                                .flatten()
                        });
                        (ty, known)
                    })
                    .collect()
            }
            (None, Err(e)) => {
                return Err(Parser::error_at(
                    &op_tok,
                    format!("node '{name}' ({}): {e}", op.name()),
                ));
            }
            (None, Ok(inf)) => {
                if inf.len() != outputs.len() {
                    let msg = format!(
                        "expected {} output names for {}, found {}",
                        inf.len(),
                        op.name(),
                        outputs.len()
                    );
                    return Err(Parser::error_at(&op_tok, msg));
                }
                inf.into_iter().map(|i| (i.ty, i.known)).collect()
            }
        };
        let mut ids = Vec::with_capacity(outputs.len());
        for ((tok, vname), (ty, known)) in outputs.into_iter().zip(recorded) {
            if scope.names.contains_key(&vname) {
                return Err(Parser::error_at(
                    &tok,
                    format!(
                        "value '%{}' is defined twice",
                        super::print::quote_name(&vname)
                    ),
                ));
            }
            ids.push(scope.define(vname, ty, known));
        }
        scope.graph.nodes.push(Node {
            name,
            op,
            inputs,
            outputs: ids,
        });
        Ok(())
    }

    /// An integer with an optional leading `-`.
    fn int(&mut self) -> PResult<i64> {
        let neg = self.eat_punct("-");
        let tok = self.tok().clone();
        match &tok.tok {
            Tok::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) => {
                self.next();
                let text = if neg { format!("-{n}") } else { n.clone() };
                text.parse::<i64>().map_err(|_| {
                    Parser::error_at(&tok, format!("expected a 64-bit integer, found {text}"))
                })
            }
            _ => Err(self.expected("an integer")),
        }
    }

    /// A number: `1`, `-2.5`, `1e-5`, `inf`, `-inf`, `NaN`.
    fn float(&mut self) -> PResult<f32> {
        let neg = self.eat_punct("-");
        let tok = self.tok().clone();
        let v = match &tok.tok {
            Tok::Number(n) => n
                .parse::<f32>()
                .map_err(|_| Parser::error_at(&tok, format!("expected a number, found {n}")))?,
            Tok::Ident(w) if w == "inf" => f32::INFINITY,
            Tok::Ident(w) if w == "NaN" || w == "nan" => f32::NAN,
            _ => return Err(self.expected("a number")),
        };
        self.next();
        Ok(if neg { -v } else { v })
    }

    fn attr_value(&mut self) -> PResult<AttrValue> {
        match self.peek().clone() {
            Tok::Punct("[") => {
                self.next();
                let mut list = Vec::new();
                if !self.is_punct("]") {
                    list.push(self.int()?);
                    while self.eat_punct(",") {
                        list.push(self.int()?);
                    }
                }
                self.expect_punct("]")?;
                Ok(AttrValue::Ints(list))
            }
            Tok::Punct("-") => match self.peek2() {
                Tok::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(AttrValue::Int(self.int()?))
                }
                _ => Ok(AttrValue::Float(self.float()?)),
            },
            Tok::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(AttrValue::Int(self.int()?))
            }
            Tok::Number(_) => Ok(AttrValue::Float(self.float()?)),
            Tok::Ident(w) if w == "true" || w == "false" => {
                self.next();
                Ok(AttrValue::Bool(w == "true"))
            }
            Tok::Ident(w) if w == "inf" || w == "NaN" || w == "nan" => {
                Ok(AttrValue::Float(self.float()?))
            }
            Tok::Ident(w) if DType::from_name(&w).is_some() && *self.peek2() == Tok::Punct("[") => {
                Ok(AttrValue::Tensor(self.tensor_literal()?))
            }
            Tok::Ident(w) => {
                self.next();
                Ok(AttrValue::Word(w))
            }
            _ => Err(self.expected("an attribute value")),
        }
    }

    /// `dtype[dims] [elements]` or `dtype[dims] hex"bytes"`.
    fn tensor_literal(&mut self) -> PResult<Tensor> {
        let start = self.tok().clone();
        let dtype = self.dtype()?;
        let shape_tok = self.tok().clone();
        let shape = self.shape()?;
        let dims = shape.as_known().ok_or_else(|| {
            Parser::error_at(
                &shape_tok,
                format!("expected known non-negative dims, found {shape}"),
            )
        })?;
        let at_data = self.tok().clone();
        let tensor = match self.peek().clone() {
            Tok::Punct("[") => {
                self.next();
                let t = self.elements(dtype, &dims, &at_data)?;
                self.expect_punct("]")?;
                t
            }
            Tok::Ident(w) if w == "hex" => {
                self.next();
                let data_tok = self.next();
                let Tok::Str(hex) = &data_tok.tok else {
                    return Err(Parser::error_at(
                        &data_tok,
                        format!("expected a hex string, found {}", data_tok.tok.describe()),
                    ));
                };
                let bytes = decode_hex(hex).ok_or_else(|| {
                    Parser::error_at(
                        &data_tok,
                        "expected an even number of hex digits [0-9a-f]".to_string(),
                    )
                })?;
                Tensor::from_bytes_or_copy(dtype, &dims, Bytes::from(bytes))
            }
            Tok::Punct("<") => {
                return Err(Parser::error_at(&at_data, "expected constant data, found an elided constant (print the graph with Display, not display_elided)".into()));
            }
            _ => return Err(self.expected("'[' elements ']' or hex\"...\"")),
        };
        tensor.map_err(|e| Parser::error_at(&start, format!("bad tensor literal: {e}")))
    }

    /// Comma-separated elements (the opening '[' is consumed).
    fn elements(
        &mut self,
        dtype: DType,
        dims: &[usize],
        at: &Token,
    ) -> PResult<Result<Tensor, crate::tensor::TensorError>> {
        let numel = crate::tensor::checked_numel(dims).unwrap_or(usize::MAX);
        let mut f = Vec::new();
        let mut i = Vec::new();
        let mut b = Vec::new();
        if !self.is_punct("]") {
            loop {
                if f.len() + i.len() + b.len() >= numel {
                    return Err(self.expected(&format!("']' after {numel} elements")));
                }
                match dtype {
                    DType::F32 => f.push(self.float()?),
                    DType::I32 | DType::I64 => i.push(self.int()?),
                    DType::Bool => match self.peek().clone() {
                        Tok::Ident(w) if w == "true" || w == "false" => {
                            self.next();
                            b.push(w == "true");
                        }
                        _ => return Err(self.expected("true or false")),
                    },
                    _ => {
                        return Err(Parser::error_at(
                            at,
                            format!("{dtype} constants are written as hex\"...\""),
                        ));
                    }
                }
                if !self.eat_punct(",") {
                    break;
                }
            }
        }
        Ok(match dtype {
            DType::F32 => Tensor::from_vec(f, dims),
            DType::I64 => Tensor::from_vec(i, dims),
            DType::I32 => {
                let mut narrowed = Vec::with_capacity(i.len());
                for v in i {
                    narrowed.push(i32::try_from(v).map_err(|_| {
                        Parser::error_at(at, format!("expected i32 elements, found {v}"))
                    })?);
                }
                Tensor::from_vec(narrowed, dims)
            }
            DType::Bool => Tensor::from_vec(b, dims),
            // an empty literal of another dtype (non-empty ones are rejected above)
            other => Tensor::from_bytes(other, dims, bytes::Bytes::new()),
        })
    }
}

/// The pieces of a parsed statement.
struct NodeParts {
    op_tok: Token,
    op: Op,
    inputs: Vec<ValueId>,
    outputs: Vec<(Token, String)>,
    node_name: Option<String>,
    types: Option<(Token, Vec<ValueType>)>,
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    hex.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}
