//! `Einsum` as a broadcast product and a sum: each operand's dims are put in
//! the order its letters first appear in the equation (missing letters as
//! size-1 dims), the operands are multiplied, the letters the output does not
//! name are summed over, and the rest are transposed into the output's order.
//!
//! Supported: explicit (`ij,jk->ik`) and implicit (`ij,jk`: the letters seen
//! once, in alphabetical order) equations over any number of operands;
//! ellipses and a letter repeated within one operand (diagonals) are
//! unsupported errors.

use crate::node::{NodeCx, NodeResult};
use shapejit_ir::{BinaryOp, Op, ReduceOp, ValueId};

/// `Einsum(inputs...; equation)`.
pub fn einsum(cx: &mut NodeCx) -> NodeResult<Vec<ValueId>> {
    let equation: String = cx
        .attr_string("equation")?
        .ok_or_else(|| cx.bad("required attribute 'equation' is missing"))?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    if equation.contains('.') {
        return Err(cx.unsupported("ellipsis in the equation"));
    }
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    let inputs = cx.inputs()?;
    if terms.len() != inputs.len() {
        return Err(cx.bad(format!(
            "equation '{equation}' has {} operands, the node {}",
            terms.len(),
            inputs.len()
        )));
    }
    let mut letters: Vec<char> = Vec::new();
    for (term, &v) in terms.iter().zip(&inputs) {
        let chars: Vec<char> = term.chars().collect();
        if chars.iter().any(|c| !c.is_ascii_alphabetic()) || chars.len() != cx.rank(v) {
            return Err(cx.bad(format!(
                "term '{term}' does not name the {} dims of its operand",
                cx.rank(v)
            )));
        }
        for (i, c) in chars.iter().enumerate() {
            if chars[..i].contains(c) {
                return Err(cx.unsupported(format!("a repeated letter in '{term}' (a diagonal)")));
            }
            if !letters.contains(c) {
                letters.push(*c);
            }
        }
    }
    let out: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut once: Vec<char> = letters
                .iter()
                .copied()
                .filter(|c| lhs.chars().filter(|x| x == c).count() == 1)
                .collect();
            once.sort_unstable();
            once
        }
    };
    if let Some(c) = out
        .iter()
        .enumerate()
        .find_map(|(i, c)| (!letters.contains(c) || out[..i].contains(c)).then_some(c))
    {
        return Err(cx.bad(format!("output letter '{c}' is unknown or repeated")));
    }
    let pos = |c: char| letters.iter().position(|&l| l == c).unwrap_or(usize::MAX);
    let mut product: Option<ValueId> = None;
    for (term, &v) in terms.iter().zip(&inputs) {
        let chars: Vec<char> = term.chars().collect();
        let mut order: Vec<usize> = (0..chars.len()).collect();
        order.sort_by_key(|&i| pos(chars[i]));
        let mut t = v;
        if order.iter().enumerate().any(|(i, &o)| i != o) {
            t = cx.op(Op::Transpose { perm: order }, &[t])?;
        }
        let missing: Vec<i64> = (0..letters.len())
            .filter(|&i| !chars.contains(&letters[i]))
            .map(|i| i as i64)
            .collect();
        if !missing.is_empty() {
            t = cx.op(Op::Unsqueeze { axes: missing }, &[t])?;
        }
        product = Some(match product {
            None => t,
            Some(p) => cx.bin(BinaryOp::Mul, p, t)?,
        });
    }
    let mut y = product.ok_or_else(|| cx.bad("no operands"))?;
    let summed: Vec<i64> = (0..letters.len())
        .filter(|&i| !out.contains(&letters[i]))
        .map(|i| i as i64)
        .collect();
    if !summed.is_empty() {
        y = cx.op(
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: summed,
                keepdims: false,
            },
            &[y],
        )?;
    }
    let kept: Vec<char> = letters
        .iter()
        .copied()
        .filter(|c| out.contains(c))
        .collect();
    let perm: Vec<usize> = out
        .iter()
        .map(|c| kept.iter().position(|k| k == c).unwrap_or(0))
        .collect();
    if perm.iter().enumerate().any(|(i, &p)| i != p) {
        y = cx.op(Op::Transpose { perm }, &[y])?;
    }
    Ok(vec![y])
}
