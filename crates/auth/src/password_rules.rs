//! `[chttpd_auth] password_regexp`: the rules a new password must follow, as CouchDB reads
//! them: an Erlang list whose items are a regular expression (a string), `{Regexp}` or
//! `{Regexp, Reason}`. A password that one rule does not match is refused with
//! "Password does not conform to requirements." and the rule's reason; a setting that is not
//! such a list refuses every new password ("Server cannot hash passwords at this time.").

/// CouchDB's reason for a password a rule does not match.
pub const PASSWORD_REQUIREMENT: &str = "Password does not conform to requirements.";
/// CouchDB's reason when the rules cannot be read.
pub const PASSWORD_RULES_BROKEN: &str = "Server cannot hash passwords at this time.";
/// Most bytes of compiled regular expression one rule may take.
const RULE_SIZE_BYTES_MAX: usize = 1 << 20;

/// Why a password was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PasswordRefused {
    /// It does not match a rule: the reason (CouchDB: 400 `bad_request`).
    Requirement(String),
    /// The rules cannot be read (CouchDB: 403 `forbidden`).
    RulesBroken,
}

/// Checks `password` against the rules of `setting` (empty or `[]`: no rules).
pub fn check_password(setting: &str, password: &str) -> Result<(), PasswordRefused> {
    let setting = setting.trim();
    if setting.is_empty() || setting == "[]" {
        return Ok(());
    }
    let Some(Term::List(items)) = parse_term(setting) else {
        return Err(PasswordRefused::RulesBroken);
    };
    for item in items {
        let (pattern, reason) = match item {
            Term::Str(pattern) => (pattern, None),
            Term::Tuple(parts) => match parts.as_slice() {
                [Term::Str(pattern)] => (pattern.clone(), None),
                [Term::Str(pattern), Term::Str(reason)] => (pattern.clone(), Some(reason.clone())),
                [Term::Str(pattern), _] => (pattern.clone(), None),
                _ => return Err(PasswordRefused::RulesBroken),
            },
            Term::List(_) => return Err(PasswordRefused::RulesBroken),
        };
        let rule = regex::RegexBuilder::new(&pattern)
            .size_limit(RULE_SIZE_BYTES_MAX)
            .build()
            .map_err(|_| PasswordRefused::RulesBroken)?;
        if !rule.is_match(password) {
            return Err(PasswordRefused::Requirement(match reason {
                Some(reason) if !reason.is_empty() => format!("{PASSWORD_REQUIREMENT} {reason}"),
                _ => PASSWORD_REQUIREMENT.to_string(),
            }));
        }
    }
    Ok(())
}

/// The part of Erlang's term syntax the setting uses.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Term {
    Str(String),
    List(Vec<Term>),
    Tuple(Vec<Term>),
}

/// Most levels of nesting read.
const DEPTH_MAX: usize = 8;

fn parse_term(text: &str) -> Option<Term> {
    let mut chars: Vec<char> = text.chars().collect();
    // An Erlang term may end with a full stop.
    if chars.last() == Some(&'.') {
        chars.pop();
    }
    let mut at = 0;
    let term = term(&chars, &mut at, 0)?;
    skip_space(&chars, &mut at);
    (at == chars.len()).then_some(term)
}

fn skip_space(chars: &[char], at: &mut usize) {
    while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
        *at += 1;
    }
}

fn term(chars: &[char], at: &mut usize, depth: usize) -> Option<Term> {
    if depth > DEPTH_MAX {
        return None;
    }
    skip_space(chars, at);
    match chars.get(*at)? {
        '"' => string(chars, at).map(Term::Str),
        '[' => sequence(chars, at, ']', depth).map(Term::List),
        '{' => sequence(chars, at, '}', depth).map(Term::Tuple),
        _ => None,
    }
}

fn sequence(chars: &[char], at: &mut usize, close: char, depth: usize) -> Option<Vec<Term>> {
    *at += 1;
    let mut items = Vec::new();
    skip_space(chars, at);
    if chars.get(*at) == Some(&close) {
        *at += 1;
        return Some(items);
    }
    loop {
        items.push(term(chars, at, depth + 1)?);
        skip_space(chars, at);
        match chars.get(*at)? {
            ',' => *at += 1,
            c if *c == close => {
                *at += 1;
                return Some(items);
            }
            _ => return None,
        }
    }
}

/// A string with Erlang's escapes (`\d` is DEL there, as in Erlang).
fn string(chars: &[char], at: &mut usize) -> Option<String> {
    *at += 1;
    let mut out = String::new();
    loop {
        let c = *chars.get(*at)?;
        *at += 1;
        match c {
            '"' => return Some(out),
            '\\' => {
                let escaped = *chars.get(*at)?;
                *at += 1;
                out.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    's' => ' ',
                    'b' => '\u{8}',
                    'd' => '\u{7f}',
                    'e' => '\u{1b}',
                    'f' => '\u{c}',
                    'v' => '\u{b}',
                    other => other,
                });
            }
            other => out.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_refuse_with_their_reasons() {
        let rules = r#"[{".{10,}"}, {"[A-Z]+", "Requirement 2."}, {"[a-z]+", ""}, {"\\d+", "Req 4."}, "[!.,()]+"]"#;
        let refused = |password| check_password(rules, password);
        assert_eq!(
            refused("funnybone"),
            Err(PasswordRefused::Requirement(PASSWORD_REQUIREMENT.into()))
        );
        assert_eq!(
            refused("funnnnnybone"),
            Err(PasswordRefused::Requirement(format!(
                "{PASSWORD_REQUIREMENT} Requirement 2."
            )))
        );
        assert_eq!(
            refused("FUNNNNNYBONE"),
            Err(PasswordRefused::Requirement(PASSWORD_REQUIREMENT.into()))
        );
        assert_eq!(
            refused("funnnnnyBONE"),
            Err(PasswordRefused::Requirement(format!(
                "{PASSWORD_REQUIREMENT} Req 4."
            )))
        );
        assert_eq!(
            refused("funnnnnyB0N3"),
            Err(PasswordRefused::Requirement(PASSWORD_REQUIREMENT.into()))
        );
        assert_eq!(refused("funnnnnyB0N3!"), Ok(()));
        assert_eq!(check_password("", "x"), Ok(()));
        assert_eq!(check_password("[]", "x"), Ok(()));
        for broken in [r#"{{".{10,}"}}"#, r#"[{".{10,}"]"#, r#"["("]"#, "[1]"] {
            assert_eq!(
                check_password(broken, "x"),
                Err(PasswordRefused::RulesBroken),
                "{broken}"
            );
        }
    }
}
