//! The query text's size and shape, checked before anything recursive sees it.
//!
//! DataFusion parses, plans, optimises and drops expressions recursively; `1+1+…+1` a few
//! kilobytes long overflows any stack. So the text is first read by sqlparser's tokenizer,
//! which is a loop, and refused when it is too long, has too many tokens, too long a list,
//! or nests too deep. Nesting is estimated from the tokens, as an upper bound of the depth
//! of the expression and plan trees the text can produce:
//!
//! - every `(`, `[` and `CASE` opens a level one deeper than the point where it opens;
//! - inside a level, every operator (`+`, `=`, `||`, `::`, `AND`, `OR`, `NOT`, `LIKE`, `IS`,
//!   `IN`, `BETWEEN`, …) since the last `,` or clause keyword adds one, since a chain
//!   `a + b + c` is a tree as deep as it is long;
//! - every `JOIN`, every `,` in a `FROM` list and every `UNION`, `INTERSECT` or `EXCEPT` of
//!   the level adds one, since joins and set operations chain the same way.
//!
//! The estimate only needs to be an upper bound; it may refuse a query that would have
//! been fine, never let through one that is deeper.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Shape, SqlError};
use crate::limits::{bytes, Limits};

/// One nesting level: a parenthesis, a bracket or a `CASE`, or the whole text.
#[derive(Debug, Default)]
struct Level {
    /// Depth where the level opened.
    base: usize,
    /// Operators since the last `,` or clause keyword.
    chain: usize,
    /// Joins and set operations of the level.
    joins: usize,
    /// Items of the current list (`,` separated).
    items: usize,
    /// Between `FROM` and the next clause: a `,` is a join.
    in_from: bool,
}

impl Level {
    fn depth(&self) -> usize {
        self.base + self.chain + self.joins
    }
}

/// The deepest nesting [`check`] estimated, for tests and measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub depth: usize,
    pub tokens: usize,
    pub list_items: usize,
}

/// Checks `sql` against the text limits of `limits`.
///
/// # Errors
/// [`SqlError::TextTooLong`] over `text_bytes`; [`SqlError::TooComplex`] naming the line
/// and column where the depth, token or list limit was passed; [`SqlError::Plan`] when the
/// text does not tokenize (an unterminated string, say).
pub fn check(sql: &str, limits: &Limits) -> Result<Measured, SqlError> {
    if sql.len() > limits.text_bytes {
        return Err(SqlError::TextTooLong { bytes: sql.len(), limit: bytes(limits.text_bytes as u64) });
    }
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location().map_err(SqlError::plan)?;
    let mut measured = Measured { depth: 0, tokens: 0, list_items: 0 };
    let mut levels = vec![Level::default()];
    for t in &tokens {
        let at = (t.span.start.line, t.span.start.column);
        let too = |what: &'static str, found: usize, limit: usize| {
            Err(SqlError::TooComplex(Shape { what, found, limit, line: at.0, column: at.1 }))
        };
        if matches!(t.token, Token::Whitespace(_) | Token::EOF) {
            continue;
        }
        measured.tokens += 1;
        if measured.tokens > limits.tokens {
            return too("tokens", measured.tokens, limits.tokens);
        }
        let level = levels.last_mut().expect("the outermost level is never closed");
        match classify(&t.token) {
            Kind::Open => {
                let base = level.depth() + 1;
                levels.push(Level { base, ..Level::default() });
            }
            Kind::Close => {
                if levels.len() > 1 {
                    levels.pop();
                }
            }
            Kind::Operator => level.chain += 1,
            Kind::Comma => {
                level.chain = 0;
                level.items += 1;
                if level.in_from {
                    level.joins += 1;
                }
                measured.list_items = measured.list_items.max(level.items + 1);
                if level.items + 1 > limits.list_items {
                    return too("items in one list", level.items + 1, limits.list_items);
                }
            }
            Kind::Clause { from, list } => {
                level.chain = 0;
                if let Some(from) = from {
                    level.in_from = from;
                }
                if list {
                    level.items = 0;
                }
            }
            Kind::Join => {
                level.chain = 0;
                level.joins += 1;
            }
            Kind::Operand => {}
        }
        let depth = levels.last().map_or(0, Level::depth);
        measured.depth = measured.depth.max(depth);
        if depth > limits.depth {
            return too("nesting depth", depth, limits.depth);
        }
    }
    Ok(measured)
}

enum Kind {
    Open,
    Close,
    Operator,
    Comma,
    /// A clause keyword: ends an operand; `from` says whether a `FROM` list starts (`true`)
    /// or ends (`false`); `list` whether a new list starts.
    Clause {
        from: Option<bool>,
        list: bool,
    },
    Join,
    Operand,
}

fn classify(t: &Token) -> Kind {
    match t {
        Token::LParen | Token::LBracket | Token::LBrace => Kind::Open,
        Token::RParen | Token::RBracket | Token::RBrace => Kind::Close,
        Token::Comma => Kind::Comma,
        Token::SemiColon => Kind::Clause { from: Some(false), list: true },
        Token::Word(w) if w.quote_style.is_none() => word(&w.value.to_ascii_uppercase()),
        Token::Word(_)
        | Token::Number(..)
        | Token::Char(_)
        | Token::Placeholder(_)
        | Token::Period
        | Token::Colon
        | Token::SingleQuotedString(_)
        | Token::DoubleQuotedString(_)
        | Token::TripleSingleQuotedString(_)
        | Token::TripleDoubleQuotedString(_)
        | Token::DollarQuotedString(_)
        | Token::SingleQuotedByteStringLiteral(_)
        | Token::DoubleQuotedByteStringLiteral(_)
        | Token::TripleSingleQuotedByteStringLiteral(_)
        | Token::TripleDoubleQuotedByteStringLiteral(_)
        | Token::SingleQuotedRawStringLiteral(_)
        | Token::DoubleQuotedRawStringLiteral(_)
        | Token::TripleSingleQuotedRawStringLiteral(_)
        | Token::TripleDoubleQuotedRawStringLiteral(_)
        | Token::NationalStringLiteral(_)
        | Token::EscapedStringLiteral(_)
        | Token::UnicodeStringLiteral(_)
        | Token::HexStringLiteral(_) => Kind::Operand,
        // Every other token is an operator of some dialect: counted, to be safe.
        _ => Kind::Operator,
    }
}

fn word(w: &str) -> Kind {
    match w {
        "CASE" => Kind::Open,
        "END" => Kind::Close,
        "AND" | "OR" | "XOR" | "NOT" | "LIKE" | "ILIKE" | "SIMILAR" | "REGEXP" | "RLIKE" | "IS" | "IN"
        | "BETWEEN" | "COLLATE" | "AT" | "DIV" | "MOD" | "ANY" | "ALL" | "SOME" | "EXISTS" | "OVERLAPS" => {
            Kind::Operator
        }
        "JOIN" | "UNION" | "INTERSECT" | "EXCEPT" | "MINUS" => Kind::Join,
        "FROM" => Kind::Clause { from: Some(true), list: true },
        "SELECT" | "WHERE" | "GROUP" | "HAVING" | "ORDER" | "LIMIT" | "OFFSET" | "WINDOW" | "QUALIFY"
        | "VALUES" | "WITH" => Kind::Clause { from: Some(false), list: true },
        "ON" | "USING" | "WHEN" | "THEN" | "ELSE" | "AS" | "BY" | "PARTITION" | "OVER" => {
            Kind::Clause { from: None, list: false }
        }
        _ => Kind::Operand,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(sql: &str) -> usize {
        check(sql, &Limits { depth: usize::MAX, ..Limits::default() }).unwrap().depth
    }

    #[test]
    fn depth_counts_every_kind_of_nesting() {
        assert_eq!(depth("SELECT 1"), 0);
        assert_eq!(depth("SELECT 1 + 1 + 1"), 2);
        // `(` is a level of its own (sqlparser keeps a `Nested` node for it).
        assert_eq!(depth("SELECT (1 + (1 + 1)), 2"), 4);
        assert_eq!(depth("SELECT a FROM t WHERE x = 1 AND y = 2"), 3);
        assert_eq!(depth("SELECT * FROM a, b, c JOIN d ON a.x = d.x"), 4);
        assert_eq!(depth("SELECT 1 UNION SELECT 2 UNION SELECT 3"), 2);
        assert_eq!(depth("SELECT CASE WHEN x = 1 THEN CASE WHEN y = 2 THEN 1 END END"), 3);
        // A chain resets at a comma and at a clause keyword; only the longest counts.
        assert_eq!(depth("SELECT 1 + 1, 1 + 1 + 1 FROM t WHERE a = 1"), 2);
    }

    #[test]
    fn a_long_chain_is_refused_naming_where_it_passed_the_limit() {
        let sql = format!("SELECT 1{}", "+1".repeat(200));
        let e = check(&sql, &Limits::default()).unwrap_err();
        assert!(
            matches!(&e, SqlError::TooComplex(s) if s.what == "nesting depth" && s.limit == 128 && s.line == 1 && s.column == 7 + 2 * 129),
            "{e}"
        );
        assert!(e.to_string().contains("line 1, column 265"), "{e}");
        // Just within the limit.
        let sql = format!("SELECT 1{}", "+1".repeat(128));
        assert_eq!(check(&sql, &Limits::default()).unwrap().depth, 128);
    }

    #[test]
    fn text_over_64_kib_is_refused_naming_the_limit() {
        let e = check(&"x".repeat(70_000), &Limits::default()).unwrap_err();
        assert!(matches!(e, SqlError::TextTooLong { bytes: 70_000, .. }), "{e}");
        assert!(e.to_string().contains("64 KiB"), "{e}");
    }

    #[test]
    fn a_list_of_1024_items_is_refused_where_1023_pass() {
        let sql = format!("SELECT 1{}", ",1".repeat(1024));
        let e = check(&sql, &Limits::default()).unwrap_err();
        assert!(matches!(&e, SqlError::TooComplex(s) if s.what == "items in one list"), "{e}");
        let sql = format!("SELECT 1{}", ",1".repeat(1023));
        assert!(check(&sql, &Limits::default()).is_ok());
    }

    #[test]
    fn a_query_over_the_token_limit_is_refused() {
        let sql = format!("SELECT 1{}", ",1".repeat(1023));
        let e = check(&sql, &Limits { tokens: 100, ..Limits::default() }).unwrap_err();
        assert!(matches!(&e, SqlError::TooComplex(s) if s.what == "tokens"), "{e}");
    }

    #[test]
    fn strings_and_comments_do_not_count() {
        let sql =
            format!("SELECT '{}' -- {}\n/* {} */", "(+".repeat(500), "(+".repeat(500), "(+".repeat(500));
        assert_eq!(depth(&sql), 0);
    }
}
