//! The `.sjir` tokenizer: identifiers, `%value` / `@name` names (bare or
//! quoted), numbers, strings and punctuation, each with its 1-based line and
//! column. `//` starts a comment that runs to the end of the line.
//!
//! **Invariant:** columns count characters, not bytes, so a position in an
//! error points at the right place in any editor.

use crate::error::IrError;

/// One token kind.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`
    Ident(String),
    /// `%name` or `%"quoted"`
    Value(String),
    /// `@name` or `@"quoted"`
    At(String),
    /// digits, with an optional fraction or exponent (kept as text)
    Number(String),
    /// `"..."` (used after `hex`)
    Str(String),
    /// one of `( ) [ ] { } < > , : = + - *`, or `->`
    Punct(&'static str),
    /// end of input
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Value(s) => format!("'%{}'", super::print::quote_name(s)),
            Tok::At(s) => format!("'@{}'", super::print::quote_name(s)),
            Tok::Number(s) => format!("number {s}"),
            Tok::Str(_) => "a string".into(),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::Eof => "end of input".into(),
        }
    }
}

/// A token with its position and byte span in the source.
#[derive(Clone, Debug)]
pub(super) struct Token {
    pub tok: Tok,
    pub line: usize,
    pub column: usize,
    pub start: usize,
    pub end: usize,
}

/// True for characters allowed in a bare `%` / `@` name.
pub(super) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

const PUNCT: [&str; 14] = [
    "->", "(", ")", "[", "]", "{", "}", "<", ">", ",", ":", "=", "+", "*",
];

/// Splits `src` into tokens (the last one is [`Tok::Eof`]).
pub(super) fn tokenize(src: &str) -> Result<Vec<Token>, IrError> {
    let mut lx = Lexer {
        src,
        pos: 0,
        line: 1,
        column: 1,
    };
    let mut out = Vec::new();
    loop {
        lx.skip_trivia();
        let (line, column, start) = (lx.line, lx.column, lx.pos);
        let tok = lx.next_tok()?;
        let done = tok == Tok::Eof;
        out.push(Token {
            tok,
            line,
            column,
            start,
            end: lx.pos,
        });
        if done {
            return Ok(out);
        }
    }
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: usize,
    column: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn error(&self, message: String) -> IrError {
        IrError::Parse {
            line: self.line,
            column: self.column,
            message,
        }
    }

    fn skip_trivia(&mut self) {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('/') if self.src[self.pos..].starts_with("//") => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                _ => return,
            }
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.bump();
        }
        self.src[start..self.pos].to_string()
    }

    fn next_tok(&mut self) -> Result<Tok, IrError> {
        let Some(c) = self.peek() else {
            return Ok(Tok::Eof);
        };
        if c.is_ascii_alphabetic() || c == '_' {
            return Ok(Tok::Ident(
                self.take_while(|c| c.is_ascii_alphanumeric() || c == '_'),
            ));
        }
        if c.is_ascii_digit() {
            return Ok(Tok::Number(self.number()));
        }
        if c == '%' || c == '@' {
            self.bump();
            let name = self.name(c)?;
            return Ok(if c == '%' {
                Tok::Value(name)
            } else {
                Tok::At(name)
            });
        }
        if c == '"' {
            return Ok(Tok::Str(self.string()?));
        }
        if c == '-' {
            self.bump();
            if self.peek() == Some('>') {
                self.bump();
                return Ok(Tok::Punct("->"));
            }
            return Ok(Tok::Punct("-"));
        }
        if let Some(p) = PUNCT
            .iter()
            .find(|p| p.len() == 1 && self.src[self.pos..].starts_with(**p))
        {
            self.bump();
            return Ok(Tok::Punct(p));
        }
        Err(self.error(format!("expected a token, found character {c:?}")))
    }

    fn number(&mut self) -> String {
        let start = self.pos;
        self.take_while(|c| c.is_ascii_digit());
        if self.peek() == Some('.') {
            self.bump();
            self.take_while(|c| c.is_ascii_digit());
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let rest = &self.src[self.pos + 1..];
            let signed = rest.starts_with(['+', '-']);
            let digits = if signed { &rest[1..] } else { rest };
            if digits.starts_with(|c: char| c.is_ascii_digit()) {
                self.bump();
                if signed {
                    self.bump();
                }
                self.take_while(|c| c.is_ascii_digit());
            }
        }
        self.src[start..self.pos].to_string()
    }

    fn name(&mut self, sigil: char) -> Result<String, IrError> {
        if self.peek() == Some('"') {
            return self.string();
        }
        let name = self.take_while(is_name_char);
        if name.is_empty() {
            return Err(self.error(format!("expected a name or a quoted name after '{sigil}'")));
        }
        Ok(name)
    }

    /// A `"..."` string with `\\`, `\"`, `\n`, `\t` and `\u{HEX}` escapes.
    fn string(&mut self) -> Result<String, IrError> {
        let (line, column) = (self.line, self.column);
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None => {
                    let message =
                        "expected '\"' to close the string started here, found end of input";
                    return Err(IrError::Parse {
                        line,
                        column,
                        message: message.into(),
                    });
                }
                Some('"') => return Ok(out),
                Some('\\') => match self.bump() {
                    Some('\\') => out.push('\\'),
                    Some('"') => out.push('"'),
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('u') => out.push(self.unicode_escape()?),
                    other => {
                        return Err(self.error(format!(
                            "expected an escape (\\\\ \\\" \\n \\t \\u{{..}}), found {other:?}"
                        )));
                    }
                },
                Some(c) => out.push(c),
            }
        }
    }

    fn unicode_escape(&mut self) -> Result<char, IrError> {
        if self.bump() != Some('{') {
            return Err(self.error("expected '{' after \\u".into()));
        }
        let hex = self.take_while(|c| c.is_ascii_hexdigit());
        if self.bump() != Some('}') || hex.is_empty() || hex.len() > 6 {
            return Err(self.error("expected 1 to 6 hex digits and '}' in \\u{..}".into()));
        }
        u32::from_str_radix(&hex, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| self.error(format!("\\u{{{hex}}} is not a unicode scalar value")))
    }
}
