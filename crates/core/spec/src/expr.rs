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

use std::cmp::Ordering;
use std::fmt;

use rust_decimal::Decimal;

use crate::types::{Value, ValueType};

/// The deepest expression [`Expr::parse`] accepts, counting every operator, `not`, sign and
/// `coalesce` on the way down (parentheses add none). Far beyond any real condition, and shallow
/// enough that parsing, checking, evaluating and dropping an expression cannot exhaust a thread's
/// stack, whatever a `where=` parameter or a spec holds.
pub const MAX_DEPTH: usize = 64;

/// A parsed expression, at most [`MAX_DEPTH`] deep.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Value),
    Name(String),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Coalesce(Vec<Expr>),
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

    /// Evaluates the expression, reading names through `lookup`.
    ///
    /// # Errors
    /// Overflow, division by zero, or an unknown name.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<Value>) -> Result<Value, String> {
        match self {
            Expr::Literal(v) => Ok(v.clone()),
            Expr::Name(n) => lookup(n).ok_or_else(|| format!("unknown name `{n}`")),
            Expr::Neg(e) => match e.eval(lookup)? {
                Value::Null => Ok(Value::Null),
                Value::Int(i) => i.checked_neg().map(Value::Int).ok_or_else(|| "integer overflow".into()),
                Value::Decimal(d) => Ok(Value::Decimal(-d)),
                other => Err(format!("cannot negate {other}")),
            },
            Expr::Not(e) => match e.eval(lookup)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                _ => Ok(Value::Null),
            },
            Expr::Coalesce(args) => {
                for a in args {
                    let v = a.eval(lookup)?;
                    if !v.is_null() {
                        return Ok(v);
                    }
                }
                Ok(Value::Null)
            }
            Expr::Binary(BinOp::And, a, b) => match a.eval(lookup)? {
                Value::Bool(false) => Ok(Value::Bool(false)),
                va => match (va, b.eval(lookup)?) {
                    (_, Value::Bool(false)) => Ok(Value::Bool(false)),
                    (Value::Bool(true), Value::Bool(true)) => Ok(Value::Bool(true)),
                    _ => Ok(Value::Null),
                },
            },
            Expr::Binary(BinOp::Or, a, b) => match a.eval(lookup)? {
                Value::Bool(true) => Ok(Value::Bool(true)),
                va => match (va, b.eval(lookup)?) {
                    (_, Value::Bool(true)) => Ok(Value::Bool(true)),
                    (Value::Bool(false), Value::Bool(false)) => Ok(Value::Bool(false)),
                    _ => Ok(Value::Null),
                },
            },
            Expr::Binary(op, a, b) => binary(*op, a.eval(lookup)?, b.eval(lookup)?),
        }
    }

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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(String),
    Str(String),
    Ident(String),
    Sym(&'static str),
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Num(s) | Tok::Ident(s) => f.write_str(s),
            Tok::Str(s) => write!(f, "'{s}'"),
            Tok::Sym(s) => f.write_str(s),
        }
    }
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, String> {
    const SYMS: [&str; 14] = ["==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "(", ")", ",", "="];
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            out.push((Tok::Num(chars[start..i].iter().collect()), start));
        } else if c == '\'' {
            let start = i;
            i += 1;
            let mut s = String::new();
            loop {
                match chars.get(i) {
                    None => {
                        return Err(format!("unterminated string starting at position {start} in `{src}`"))
                    }
                    Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                        s.push('\'');
                        i += 2;
                    }
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some(ch) => {
                        s.push(*ch);
                        i += 1;
                    }
                }
            }
            out.push((Tok::Str(s), start));
        } else if c.is_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.' | '$')) {
                i += 1;
            }
            out.push((Tok::Ident(chars[start..i].iter().collect()), start));
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let sym = SYMS
                .iter()
                .find(|s| rest.starts_with(**s))
                .ok_or_else(|| format!("unexpected character `{c}` at position {i} in `{src}`"))?;
            if *sym == "=" {
                return Err(format!("use `==` for equality (position {i} in `{src}`)"));
            }
            out.push((Tok::Sym(sym), i));
            i += sym.len();
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    pos: usize,
    /// Nesting of the parse functions' recursion (`not`, `-`, parentheses, `coalesce`).
    depth: usize,
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

    fn peek(&self) -> Option<&(Tok, usize)> {
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

    fn or(&mut self) -> Result<Expr, String> {
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

#[cfg(test)]
mod tests {
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
    fn arithmetic_and_precedence() {
        let e = Expr::parse("on_hand - reserved * 2 + 1").unwrap();
        assert_eq!(e.eval(&env).unwrap(), Value::Int(3));
        let e = Expr::parse("(on_hand - reserved) * price").unwrap();
        assert_eq!(e.eval(&env).unwrap(), Value::Decimal(Decimal::new(7500, 2)));
    }

    #[test]
    fn null_propagates_and_coalesce_recovers() {
        assert_eq!(Expr::parse("on_hand + inbound").unwrap().eval(&env).unwrap(), Value::Null);
        let e = Expr::parse("on_hand - reserved + coalesce(inbound, 0) < 7").unwrap();
        assert!(e.holds(&env).unwrap());
        assert!(!Expr::parse("inbound > 0").unwrap().holds(&env).unwrap());
    }

    #[test]
    fn strings_and_logic() {
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
