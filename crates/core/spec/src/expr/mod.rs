//! A small, typed expression language for mapping columns, `when` conditions and (later)
//! trigger conditions.
//!
//! ```text
//! expr    := or
//! or      := and ("or" and)*
//! and     := not ("and" not)*
//! not     := "not" not | cmp
//! cmp     := sum (("==" | "!=" | "<" | "<=" | ">" | ">=") sum)?
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/") unary)*
//! unary   := "-" unary | primary
//! primary := number | 'text' | true | false | null | name | name "(" args ")" | "(" expr ")"
//! ```
//! Names are event fields (`qty`) or envelope fields (`$event.id`, `$event.type`,
//! `$event.occurred_at`, `$event.offset`, `$event.causation`). The only function is
//! `coalesce(a, b, ...)`. Arithmetic and comparison with a null yield null; a null condition is false.
//!
//! Its parts, by job: `lex` (tokens), `parse` (the grammar above), `check` (an expression's
//! type) and `eval` (its value).

use std::fmt;

use crate::types::{Value, ValueType};

/// The deepest expression [`Expr::parse`] accepts, counting every operator, `not`, sign and
/// `coalesce` on the way down (parentheses add none). Far beyond any real condition, and shallow
/// enough that parsing, checking, evaluating and dropping an expression cannot exhaust a thread's
/// stack, whatever a `where=` parameter or a spec holds.
pub const MAX_DEPTH: usize = 64;

/// A parsed expression, at most [`MAX_DEPTH`] deep. Its names are `N`: the names as written
/// (`String`), or what a compiled mapping resolved them to once, at spec load
/// ([`Expr::resolve`]), so that evaluating it per event looks nothing up by name.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr<N = String> {
    Literal(Value),
    Name(N),
    Neg(Box<Expr<N>>),
    Not(Box<Expr<N>>),
    Binary(BinOp, Box<Expr<N>>, Box<Expr<N>>),
    Coalesce(Vec<Expr<N>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl fmt::Display for BinOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
        })
    }
}

/// The static type of an expression; `Null` is the type of the literal `null`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExprType {
    Null,
    Of(ValueType),
}

impl fmt::Display for ExprType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExprType::Null => f.write_str("null"),
            ExprType::Of(t) => t.fmt(f),
        }
    }
}

mod check;
mod eval;
mod lex;
mod parse;

pub use eval::compare;
use lex::lex;
use parse::Parser;

impl Expr {
    /// Parses `src`.
    ///
    /// # Errors
    /// A message with the character position of the problem; an expression nested deeper than
    /// [`MAX_DEPTH`].
    pub fn parse(src: &str) -> Result<Expr, String> {
        let tokens = lex(src)?;
        let mut p = Parser { tokens, pos: 0, depth: 0 };
        let e = p.or()?;
        match p.peek() {
            None => Ok(e),
            Some((tok, at)) => Err(format!("unexpected `{tok}` at position {at} in `{src}`")),
        }
    }

    /// The same expression with every name replaced by what `resolve` makes of it.
    ///
    /// # Errors
    /// The first error `resolve` gives.
    pub fn resolve<M>(&self, resolve: &dyn Fn(&str) -> Result<M, String>) -> Result<Expr<M>, String> {
        Ok(match self {
            Expr::Literal(v) => Expr::Literal(v.clone()),
            Expr::Name(n) => Expr::Name(resolve(n)?),
            Expr::Neg(e) => Expr::Neg(Box::new(e.resolve(resolve)?)),
            Expr::Not(e) => Expr::Not(Box::new(e.resolve(resolve)?)),
            Expr::Binary(op, a, b) => {
                Expr::Binary(*op, Box::new(a.resolve(resolve)?), Box::new(b.resolve(resolve)?))
            }
            Expr::Coalesce(args) => {
                Expr::Coalesce(args.iter().map(|a| a.resolve(resolve)).collect::<Result<_, _>>()?)
            }
        })
    }

    /// Levels from the root to the deepest leaf (a literal or a name is 1).
    fn height(&self) -> usize {
        match self {
            Expr::Literal(_) | Expr::Name(_) => 1,
            Expr::Neg(e) | Expr::Not(e) => 1 + e.height(),
            Expr::Binary(_, a, b) => 1 + a.height().max(b.height()),
            Expr::Coalesce(args) => 1 + args.iter().map(Expr::height).max().unwrap_or(0),
        }
    }

    /// Every name the expression refers to.
    pub fn names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Expr::Literal(_) => {}
            Expr::Name(n) => out.push(n),
            Expr::Neg(e) | Expr::Not(e) => e.collect_names(out),
            Expr::Binary(_, a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
            Expr::Coalesce(args) => args.iter().for_each(|a| a.collect_names(out)),
        }
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal::Decimal;

    use super::*;

    #[test]
    fn required_equalities_are_the_top_level_and_terms_comparing_a_name_with_a_literal() {
        let eq = |src: &str| {
            let e = Expr::parse(src).unwrap();
            e.required_equalities().into_iter().map(|(n, v)| (n.to_string(), v.clone())).collect::<Vec<_>>()
        };
        let s = |v: &str| Value::String(v.into());
        assert_eq!(eq("item == 'bolt'"), vec![("item".into(), s("bolt"))]);
        assert_eq!(
            eq("'north' == location and qty > 2 and (line == 1 and done == false)"),
            vec![
                ("location".into(), s("north")),
                ("line".into(), Value::Int(1)),
                ("done".into(), Value::Bool(false))
            ]
        );
        for none in [
            "item == 'bolt' or item == 'nut'",
            "not (item == 'bolt')",
            "item != 'bolt'",
            "item == null",
            "item == other",
            "qty + 1 == 3",
        ] {
            assert_eq!(eq(none), Vec::new(), "{none}");
        }
        // Every row the condition holds for has the required values.
        let e = Expr::parse("status == 'blocked' and on_hand > 3").unwrap();
        assert!(e.holds(&env).unwrap());
        for (n, v) in e.required_equalities() {
            assert_eq!(env(n).as_ref(), Some(v));
        }
    }

    fn env(name: &str) -> Option<Value> {
        match name {
            "on_hand" => Some(Value::Int(10)),
            "reserved" => Some(Value::Int(4)),
            "inbound" => Some(Value::Null),
            "price" => Some(Value::Decimal(Decimal::new(1250, 2))),
            "status" => Some(Value::String("blocked".into())),
            _ => None,
        }
    }

    fn types(name: &str) -> Option<ValueType> {
        env(name).and_then(|v| v.value_type()).or(match name {
            "inbound" => Some(ValueType::Int),
            _ => None,
        })
    }

    #[test]
    fn multiplication_binds_tighter_than_addition_and_parentheses_override_it() {
        let e = Expr::parse("on_hand - reserved * 2 + 1").unwrap();
        assert_eq!(e.eval(&env).unwrap(), Value::Int(3));
        let e = Expr::parse("(on_hand - reserved) * price").unwrap();
        assert_eq!(e.eval(&env).unwrap(), Value::Decimal(Decimal::new(7500, 2)));
    }

    #[test]
    fn null_propagates_through_arithmetic_and_a_comparison_with_null_does_not_hold() {
        assert_eq!(Expr::parse("on_hand + inbound").unwrap().eval(&env).unwrap(), Value::Null);
        assert!(!Expr::parse("inbound > 0").unwrap().holds(&env).unwrap());
    }

    #[test]
    fn coalesce_replaces_a_null() {
        let e = Expr::parse("on_hand - reserved + coalesce(inbound, 0) < 7").unwrap();
        assert!(e.holds(&env).unwrap());
    }

    #[test]
    fn a_string_comparison_combines_with_not_and_and() {
        let e = Expr::parse("status == 'blocked' and not (on_hand < 5)").unwrap();
        assert!(e.holds(&env).unwrap());
    }

    #[test]
    fn type_errors_name_the_operator() {
        let e = Expr::parse("status + 1").unwrap();
        assert!(e.type_check(&types).unwrap_err().contains("`+` cannot combine string and int"));
        let e = Expr::parse("missing").unwrap();
        assert!(e.type_check(&types).unwrap_err().contains("unknown name `missing`"));
    }

    #[test]
    fn syntax_errors_say_where() {
        assert!(Expr::parse("a = 1").unwrap_err().contains("use `==`"));
        assert!(Expr::parse("(a + 1").unwrap_err().contains("missing `)`"));
        assert!(Expr::parse("'open").unwrap_err().contains("unterminated"));
        assert!(Expr::parse("a b").unwrap_err().contains("unexpected `b`"));
        assert!(Expr::parse("upper(a)").unwrap_err().contains("unknown function"));
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_an_error_not_a_stack_overflow() {
        let within = format!("{}i{}", "(".repeat(MAX_DEPTH - 1), ")".repeat(MAX_DEPTH - 1));
        assert!(Expr::parse(&within).is_ok());
        let chain = vec!["i"; MAX_DEPTH / 2].join(" + ");
        assert!(Expr::parse(&chain).is_ok());
        for deep in [
            format!("{}i{}", "(".repeat(100_000), ")".repeat(100_000)),
            format!("{}b", "not ".repeat(100_000)),
            format!("{}i", "-".repeat(100_000)),
            vec!["i"; 100_000].join(" + "),
            vec!["b"; 100_000].join(" and "),
            format!("{}i{}", "coalesce(".repeat(100_000), ")".repeat(100_000)),
        ] {
            let e = Expr::parse(&deep).unwrap_err();
            assert!(e.contains("nests deeper than 64 levels"), "{e}");
        }
    }

    #[test]
    fn division_by_zero_is_an_error() {
        assert!(Expr::parse("on_hand / 0").unwrap().eval(&env).unwrap_err().contains("division by zero"));
    }
}
