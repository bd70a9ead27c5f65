//! Tool arguments: parsed once, checked against the tool's schema, then frozen.
//!
//! Why frozen: history, audit, UI and execution must agree on what a call was asked to do, so
//! no listener may rewrite arguments (DESIGN.md I8). [`Args`] is an `Arc` around text and a
//! parsed value with no way to mutate either; everyone gets a clone of the same allocation.

use serde_json::Value;
use std::sync::Arc;

/// A call's arguments, immutable and cheap to share.
#[derive(Debug, Clone, PartialEq)]
pub struct Args(Arc<ArgsInner>);

#[derive(Debug, PartialEq)]
struct ArgsInner {
    raw: String,
    value: Value,
    canonical: String,
}

impl Args {
    /// The text the model sent, byte for byte.
    pub fn raw(&self) -> &str {
        &self.0.raw
    }

    /// The parsed value (`{}` when the model sent nothing).
    pub fn value(&self) -> &Value {
        &self.0.value
    }

    /// The parsed value as compact JSON text: what `parsed` journals.
    pub fn canonical(&self) -> &str {
        &self.0.canonical
    }

    /// The top-level field `key`; `None` when absent or when the arguments are not an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.value.get(key)
    }

    /// The top-level field `key` if it is a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    /// Frozen arguments from their parts: `raw` as received, `value` parsed from it and
    /// `canonical` its [`canonical`] text.
    pub(crate) fn from_parts(raw: String, value: Value, canonical: String) -> Args {
        Args(Arc::new(ArgsInner {
            raw,
            value,
            canonical,
        }))
    }

    /// Whether two handles share one allocation (the same frozen arguments).
    pub fn same(&self, other: &Args) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Invalid JSON: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// serde_json's description, without its position suffix.
    pub message: String,
    /// Line of the error in the raw text, from 1.
    pub line: usize,
    /// Column of the error in that line, from 1 (serde_json's count).
    pub column: usize,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "arguments are not valid JSON: {} (line {}, column {})",
            self.message, self.line, self.column
        )
    }
}

/// Parses raw argument text. Empty (or all-whitespace) text means no arguments: `{}`.
pub fn parse(raw: &str) -> Result<Args, SyntaxError> {
    let value = parse_value(raw)?;
    let canonical = canonical(&value);
    Ok(Args::from_parts(raw.to_owned(), value, canonical))
}

/// [`parse`]'s value alone. Empty (or all-whitespace) text means no arguments: `{}`.
pub(crate) fn parse_value(raw: &str) -> Result<Value, SyntaxError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str::<Value>(raw).map_err(|e| SyntaxError {
        message: strip_position(&e.to_string()),
        line: e.line(),
        column: e.column(),
    })
}

/// The value as compact JSON text ([`Args::canonical`]): the text `Display` gives, written
/// without going through a formatter.
pub(crate) fn canonical(value: &Value) -> String {
    // A `Value` always serializes (its keys are strings); the fallback is the same text.
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// serde_json appends " at line L column C" to its messages; we report those separately.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// A compiled JSON Schema.
pub struct Schema {
    source: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema")
            .field("source", &self.source)
            .finish()
    }
}

/// A value that does not satisfy a schema: the first failing place and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// JSON Pointer to the failing value (`""` is the whole value).
    pub path: String,
    /// Why it fails, as the validator says it.
    pub message: String,
}

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "field {}: {}", self.path, self.message)
        }
    }
}

impl Schema {
    /// Compiles a schema; the error says what is wrong with it.
    pub fn compile(source: Value) -> Result<Schema, String> {
        let validator = jsonschema::validator_for(&source).map_err(|e| e.to_string())?;
        Ok(Schema { source, validator })
    }

    /// The schema as given, before compiling.
    pub fn source(&self) -> &Value {
        &self.source
    }

    /// Checks `value`; on failure names the first failing field.
    pub fn check(&self, value: &Value) -> Result<(), SchemaViolation> {
        // The boolean check allocates nothing and stops early; the errors are collected only
        // for a value that fails it (the validator's two answers agree).
        if self.validator.is_valid(value) {
            return Ok(());
        }
        match self.validator.iter_errors(value).next() {
            None => Ok(()),
            Some(e) => Err(SchemaViolation {
                path: e.instance_path().to_string(),
                message: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_arguments_become_an_empty_object_and_raw_text_is_kept() {
        for raw in ["", "  \n"] {
            let a = parse(raw).unwrap();
            assert_eq!(a.value(), &json!({}));
            assert_eq!(a.raw(), raw);
        }
        let a = parse("{ \"path\" :\"a.txt\" }").unwrap();
        assert_eq!(a.raw(), "{ \"path\" :\"a.txt\" }");
        assert_eq!(a.canonical(), "{\"path\":\"a.txt\"}");
    }

    #[test]
    fn invalid_json_says_where() {
        let e = parse("{\"path\": \"a.txt\"").unwrap_err();
        assert_eq!((e.line, e.column), (1, 16));
        assert!(
            e.to_string()
                .starts_with("arguments are not valid JSON: EOF"),
            "{e}"
        );
    }

    #[test]
    fn schema_violation_names_the_field() {
        let s = Schema::compile(json!({
            "type": "object",
            "properties": {"limit": {"type": "integer"}},
            "required": ["path"]
        }))
        .unwrap();
        let v = s.check(&json!({"path": "a", "limit": "ten"})).unwrap_err();
        assert_eq!(v.path, "/limit");
        assert!(v.to_string().contains("integer"), "{v}");
        let v = s.check(&json!({})).unwrap_err();
        assert!(v.message.contains("\"path\""), "{v}");
        assert!(Schema::compile(json!({"type": 12})).is_err());
    }
}
