//! The recursive-descent parser of the grammar in the module's documentation, refusing
//! nesting deeper than [`MAX_DEPTH`].

use super::lex::Tok;
use super::{BinOp, Expr, MAX_DEPTH};
use crate::types::Value;

pub(super) struct Parser {
    pub(super) tokens: Vec<(Tok, usize)>,
    pub(super) pos: usize,
    /// Nesting of the parse functions' recursion (`not`, `-`, parentheses, `coalesce`).
    pub(super) depth: usize,
}

impl Parser {
    fn too_deep(&self) -> String {
        let at = self.tokens.get(self.pos.min(self.tokens.len().saturating_sub(1))).map_or(0, |(_, at)| *at);
        format!("the expression nests deeper than {MAX_DEPTH} levels (at position {at})")
    }

    /// Enters one more level of recursion; leave it with `self.depth -= 1`.
    fn descend(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.too_deep());
        }
        Ok(())
    }

    /// `e`, unless it is deeper than [`MAX_DEPTH`] (each child was checked when it was built, so
    /// measuring it recurses at most that deep).
    fn node(&self, e: Expr) -> Result<Expr, String> {
        if e.height() > MAX_DEPTH {
            return Err(self.too_deep());
        }
        Ok(e)
    }

    fn binary(&self, op: BinOp, a: Expr, b: Expr) -> Result<Expr, String> {
        self.node(Expr::Binary(op, Box::new(a), Box::new(b)))
    }

    pub(super) fn peek(&self) -> Option<&(Tok, usize)> {
        self.tokens.get(self.pos)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if matches!(self.peek(), Some((Tok::Sym(x), _)) if *x == s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, w: &str) -> bool {
        if matches!(self.peek(), Some((Tok::Ident(x), _)) if x == w) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn or(&mut self) -> Result<Expr, String> {
        let mut e = self.and()?;
        while self.eat_word("or") {
            let b = self.and()?;
            e = self.binary(BinOp::Or, e, b)?;
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut e = self.not()?;
        while self.eat_word("and") {
            let b = self.not()?;
            e = self.binary(BinOp::And, e, b)?;
        }
        Ok(e)
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.eat_word("not") {
            self.descend()?;
            let e = self.not()?;
            self.depth -= 1;
            return self.node(Expr::Not(Box::new(e)));
        }
        self.cmp()
    }

    fn cmp(&mut self) -> Result<Expr, String> {
        let e = self.sum()?;
        for (s, op) in [
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            ("<=", BinOp::Le),
            (">=", BinOp::Ge),
            ("<", BinOp::Lt),
            (">", BinOp::Gt),
        ] {
            if self.eat_sym(s) {
                let b = self.sum()?;
                return self.binary(op, e, b);
            }
        }
        Ok(e)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        loop {
            let op = if self.eat_sym("+") {
                BinOp::Add
            } else if self.eat_sym("-") {
                BinOp::Sub
            } else {
                return Ok(e);
            };
            let b = self.product()?;
            e = self.binary(op, e, b)?;
        }
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        loop {
            let op = if self.eat_sym("*") {
                BinOp::Mul
            } else if self.eat_sym("/") {
                BinOp::Div
            } else {
                return Ok(e);
            };
            let b = self.unary()?;
            e = self.binary(op, e, b)?;
        }
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat_sym("-") {
            self.descend()?;
            let e = self.unary()?;
            self.depth -= 1;
            return self.node(Expr::Neg(Box::new(e)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, String> {
        let Some((tok, at)) = self.tokens.get(self.pos).cloned() else {
            return Err("expression ends too early".into());
        };
        self.pos += 1;
        match tok {
            Tok::Num(n) => {
                if n.contains('.') {
                    crate::types::exact_decimal(&n)
                        .map(|d| Expr::Literal(Value::Decimal(d)))
                        .map_err(|why| format!("`{n}` at position {at} is not an exact number: {why}"))
                } else {
                    n.parse::<i64>()
                        .map(|i| Expr::Literal(Value::Int(i)))
                        .map_err(|_| format!("`{n}` at position {at} is too large"))
                }
            }
            Tok::Str(s) => Ok(Expr::Literal(Value::String(s))),
            Tok::Ident(w) => match w.as_str() {
                "true" => Ok(Expr::Literal(Value::Bool(true))),
                "false" => Ok(Expr::Literal(Value::Bool(false))),
                "null" => Ok(Expr::Literal(Value::Null)),
                "and" | "or" | "not" => Err(format!("`{w}` at position {at} needs an operand before it")),
                _ if self.eat_sym("(") => {
                    if w != "coalesce" {
                        return Err(format!("unknown function `{w}` at position {at} (only coalesce)"));
                    }
                    self.descend()?;
                    let mut args = vec![self.or()?];
                    while self.eat_sym(",") {
                        args.push(self.or()?);
                    }
                    if !self.eat_sym(")") {
                        return Err(format!("missing `)` after the arguments of `{w}`"));
                    }
                    self.depth -= 1;
                    self.node(Expr::Coalesce(args))
                }
                _ => Ok(Expr::Name(w)),
            },
            Tok::Sym("(") => {
                self.descend()?;
                let e = self.or()?;
                if !self.eat_sym(")") {
                    return Err(format!("missing `)` for the `(` at position {at}"));
                }
                self.depth -= 1;
                Ok(e)
            }
            Tok::Sym(s) => Err(format!("unexpected `{s}` at position {at}")),
        }
    }
}
