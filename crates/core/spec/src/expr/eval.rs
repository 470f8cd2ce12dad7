//! Evaluation: an expression's value, given the values its names resolve to. Arithmetic and
//! comparison with a null yield null; a null condition is false.

use std::cmp::Ordering;

use rust_decimal::Decimal;

use super::{BinOp, Expr};
use crate::types::Value;

impl Expr {
    /// Evaluates the expression, reading names through `lookup`.
    ///
    /// # Errors
    /// Overflow, division by zero, or an unknown name.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<Value, String> {
        self.eval_by(&|n: &String| lookup(n))
    }
}

impl<N: std::fmt::Display> Expr<N> {
    /// As [`Expr::eval`], for an expression whose names are `N` (a resolved expression reads
    /// its slots through `lookup`).
    ///
    /// # Errors
    /// As [`Expr::eval`].
    pub fn eval_by(&self, lookup: &dyn Fn(&N) -> Option<Value>) -> Result<Value, String> {
        match self {
            Expr::Literal(v) => Ok(v.clone()),
            Expr::Name(n) => lookup(n).ok_or_else(|| format!("unknown name `{n}`")),
            Expr::Neg(e) => match e.eval_by(lookup)? {
                Value::Null => Ok(Value::Null),
                Value::Int(i) => i.checked_neg().map(Value::Int).ok_or_else(|| "integer overflow".into()),
                Value::Decimal(d) => Ok(Value::Decimal(-d)),
                other => Err(format!("cannot negate {other}")),
            },
            Expr::Not(e) => match e.eval_by(lookup)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                _ => Ok(Value::Null),
            },
            Expr::Coalesce(args) => {
                for a in args {
                    let v = a.eval_by(lookup)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
                Ok(Value::Null)
            }
            Expr::Binary(BinOp::And, a, b) => match a.eval_by(lookup)? {
                Value::Bool(false) => Ok(Value::Bool(false)),
                va => match (va, b.eval_by(lookup)?) {
                    (_, Value::Bool(false)) => Ok(Value::Bool(false)),
                    (Value::Bool(true), Value::Bool(true)) => Ok(Value::Bool(true)),
                    _ => Ok(Value::Null),
                },
            },
            Expr::Binary(BinOp::Or, a, b) => match a.eval_by(lookup)? {
                Value::Bool(true) => Ok(Value::Bool(true)),
                va => match (va, b.eval_by(lookup)?) {
                    (_, Value::Bool(true)) => Ok(Value::Bool(true)),
                    (Value::Bool(false), Value::Bool(false)) => Ok(Value::Bool(false)),
                    _ => Ok(Value::Null),
                },
            },
            Expr::Binary(op, a, b) => binary(*op, a.eval_by(lookup)?, b.eval_by(lookup)?),
        }
    }

    /// As [`Expr::holds`], for an expression whose names are `N`.
    ///
    /// # Errors
    /// As [`Expr::eval`].
    pub fn holds_by(&self, lookup: &dyn Fn(&N) -> Option<Value>) -> Result<bool, String> {
        Ok(matches!(self.eval_by(lookup)?, Value::Bool(true)))
    }
}

impl Expr {
    /// The `name == literal` terms (either way round, literal not null) joined by the
    /// condition's top-level `and`s: a row the condition holds for has every one of these
    /// values. Empty when the top is anything else (`or`, `not`, a comparison other than `==`).
    /// A reader may use them to skip rows before evaluating the whole condition.
    pub fn required_equalities(&self) -> Vec<(&str, &Value)> {
        let mut out = Vec::new();
        self.collect_equalities(&mut out);
        out
    }

    fn collect_equalities<'a>(&'a self, out: &mut Vec<(&'a str, &'a Value)>) {
        match self {
            Expr::Binary(BinOp::And, a, b) => {
                a.collect_equalities(out);
                b.collect_equalities(out);
            }
            Expr::Binary(BinOp::Eq, a, b) => match (&**a, &**b) {
                (Expr::Name(n), Expr::Literal(v)) | (Expr::Literal(v), Expr::Name(n)) if !v.is_null() => {
                    out.push((n, v));
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// Evaluates a condition: true only when the expression yields `true`.
    ///
    /// # Errors
    /// As [`Expr::eval`].
    pub fn holds(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<bool, String> {
        Ok(matches!(self.eval(lookup)?, Value::Bool(true)))
    }
}

fn as_decimal(v: &Value) -> Option<Decimal> {
    match v {
        Value::Int(i) => Some(Decimal::from(*i)),
        Value::Decimal(d) => Some(*d),
        _ => None,
    }
}

fn binary(op: BinOp, a: Value, b: Value) -> Result<Value, String> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let overflow = || format!("overflow in {a} {op} {b}");
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
            if let (Value::Int(x), Value::Int(y), false) = (&a, &b, op == BinOp::Div) {
                let r = match op {
                    BinOp::Add => x.checked_add(*y),
                    BinOp::Sub => x.checked_sub(*y),
                    _ => x.checked_mul(*y),
                };
                return r.map(Value::Int).ok_or_else(overflow);
            }
            let (x, y) = match (as_decimal(&a), as_decimal(&b)) {
                (Some(x), Some(y)) => (x, y),
                _ => return Err(format!("`{op}` needs numbers, found {a} and {b}")),
            };
            let r = match op {
                BinOp::Add => x.checked_add(y),
                BinOp::Sub => x.checked_sub(y),
                BinOp::Mul => x.checked_mul(y),
                _ => {
                    if y.is_zero() {
                        return Err(format!("division by zero in {a} / {b}"));
                    }
                    x.checked_div(y)
                }
            };
            r.map(Value::Decimal).ok_or_else(overflow)
        }
        _ => {
            let ord = compare(&a, &b).ok_or_else(|| format!("cannot compare {a} with {b}"))?;
            Ok(Value::Bool(match op {
                BinOp::Eq => ord == Ordering::Equal,
                BinOp::Ne => ord != Ordering::Equal,
                BinOp::Lt => ord == Ordering::Less,
                BinOp::Le => ord != Ordering::Greater,
                BinOp::Gt => ord == Ordering::Greater,
                _ => ord != Ordering::Less,
            }))
        }
    }
}

/// Orders two non-null values of compatible types.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        _ => Some(as_decimal(a)?.cmp(&as_decimal(b)?)),
    }
}
