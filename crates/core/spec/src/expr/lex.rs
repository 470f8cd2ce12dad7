//! Tokens: numbers, quoted text, words and symbols, each with its character position.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
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

pub(super) fn lex(src: &str) -> Result<Vec<(Tok, usize)>, String> {
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
