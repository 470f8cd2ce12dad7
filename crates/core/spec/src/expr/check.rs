//! Type checking: what type an expression has, given the types its names resolve to.

use super::{BinOp, Expr, ExprType};
use crate::types::ValueType;

impl Expr {
    /// Computes the expression's type, resolving names with `resolve`.
    ///
    /// # Errors
    /// A message naming the unknown name or the operator whose operands do not fit.
    pub fn type_check(&self, resolve: &dyn Fn(&str) -> Option<ValueType>) -> Result<ExprType, String> {
        match self {
            Expr::Literal(v) => Ok(v.value_type().map_or(ExprType::Null, ExprType::Of)),
            Expr::Name(n) => resolve(n).map(ExprType::Of).ok_or_else(|| format!("unknown name `{n}`")),
            Expr::Neg(e) => match e.type_check(resolve)? {
                ExprType::Of(t) if t.is_numeric() => Ok(ExprType::Of(t)),
                ExprType::Null => Ok(ExprType::Null),
                other => Err(format!("cannot negate a {other}")),
            },
            Expr::Not(e) => match e.type_check(resolve)? {
                ExprType::Of(ValueType::Bool) | ExprType::Null => Ok(ExprType::Of(ValueType::Bool)),
                other => Err(format!("`not` needs a bool, found {other}")),
            },
            Expr::Coalesce(args) => {
                let mut ty = ExprType::Null;
                for a in args {
                    ty = unify(ty, a.type_check(resolve)?)
                        .ok_or_else(|| "coalesce arguments have different types".to_string())?;
                }
                Ok(ty)
            }
            Expr::Binary(op, a, b) => {
                let (ta, tb) = (a.type_check(resolve)?, b.type_check(resolve)?);
                let mismatch = || format!("`{op}` cannot combine {ta} and {tb}");
                match op {
                    BinOp::And | BinOp::Or => {
                        let ok = |t: ExprType| matches!(t, ExprType::Null | ExprType::Of(ValueType::Bool));
                        if ok(ta) && ok(tb) {
                            Ok(ExprType::Of(ValueType::Bool))
                        } else {
                            Err(mismatch())
                        }
                    }
                    BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        unify(ta, tb).ok_or_else(mismatch)?;
                        Ok(ExprType::Of(ValueType::Bool))
                    }
                    BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                        let numeric = |t: ExprType| match t {
                            ExprType::Null => true,
                            ExprType::Of(v) => v.is_numeric(),
                        };
                        if !numeric(ta) || !numeric(tb) {
                            return Err(mismatch());
                        }
                        let decimal = ValueType::Decimal { precision: 28, scale: 10 };
                        Ok(match (op, ta, tb) {
                            (BinOp::Div, _, _) => ExprType::Of(decimal),
                            (_, ExprType::Of(ValueType::Int), ExprType::Of(ValueType::Int)) => {
                                ExprType::Of(ValueType::Int)
                            }
                            (_, ExprType::Null, ExprType::Null) => ExprType::Null,
                            (_, ExprType::Null, t) | (_, t, ExprType::Null) => t,
                            _ => ExprType::Of(decimal),
                        })
                    }
                }
            }
        }
    }
}

fn unify(a: ExprType, b: ExprType) -> Option<ExprType> {
    match (a, b) {
        (ExprType::Null, t) | (t, ExprType::Null) => Some(t),
        (ExprType::Of(x), ExprType::Of(y)) if x == y => Some(a),
        (ExprType::Of(x), ExprType::Of(y)) if x.is_numeric() && y.is_numeric() => {
            Some(ExprType::Of(ValueType::Decimal { precision: 28, scale: 10 }))
        }
        _ => None,
    }
}
