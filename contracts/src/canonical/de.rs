//! Reading: any `Deserialize` type from strictly parsed JSON, with errors that name the field
//! at fault by its JSON path (`proposal.edits[2].prior`) and say what kind of rejection it is.
//!
//! The bytes are parsed first by the strict parser ([`parse`](super::parse): UTF-8, no
//! duplicate key, integers only, bounded size and depth), so a record type only ever sees a
//! [`Value`]. Reading it is typed: a field of the wrong JSON type is refused with
//! "must be a string, not integer" (or "must be a string or null, …" for a nullable field)
//! before the type's own checks run, and every error is given the path of the value it was
//! raised for.

use std::fmt::{self, Display};

use serde::de::{
    self, Deserialize, DeserializeOwned, DeserializeSeed, Expected, IntoDeserializer, Unexpected,
    Visitor,
};

use super::{CanonicalError, Digest, JsonError, MAX_SAFE_INTEGER, Value, parse_canonical};

/// What is wrong with one field of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Which rejection it is.
    pub kind: FieldErrorKind,
    /// The JSON path of the field, from the record's root name (`manifest.files[3].blob`).
    pub field: String,
    /// The rule the field breaks.
    pub rule: String,
}

/// The kind of rejection a [`FieldError`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FieldErrorKind {
    /// The bytes are not strict JSON (the field is the record's root).
    Json(JsonError),
    /// The bytes are strict JSON but not the canonical encoding of what they hold.
    NotCanonical,
    /// A key the record does not declare.
    Unknown,
    /// A declared key is absent.
    Missing,
    /// A value of the wrong JSON type, or of the right type breaking the field's rule.
    WrongType,
}

impl FieldError {
    /// A field of the wrong type or breaking its rule.
    pub fn wrong(field: &str, rule: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorKind::WrongType,
            field: field.to_owned(),
            rule: rule.into(),
        }
    }

    /// The document at `field` is not strict JSON.
    pub fn json(field: &str, error: &JsonError) -> Self {
        Self {
            kind: FieldErrorKind::Json(error.clone()),
            field: field.to_owned(),
            rule: error.to_string(),
        }
    }

    /// The stable kebab-case code of the rejection: `unknown-field`, `missing-field`,
    /// `wrong-type`, `not-canonical`, or the JSON error's own code.
    pub fn code(&self) -> &'static str {
        match &self.kind {
            FieldErrorKind::Json(error) => error.code(),
            FieldErrorKind::NotCanonical => "not-canonical",
            FieldErrorKind::Unknown => "unknown-field",
            FieldErrorKind::Missing => "missing-field",
            FieldErrorKind::WrongType => "wrong-type",
        }
    }
}

/// `field: rule`, or the rule alone for an error of a record read with an empty root name.
impl Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.rule)
        } else {
            write!(f, "{}: {}", self.field, self.rule)
        }
    }
}

impl std::error::Error for FieldError {}

/// Reads `value` as a `T`; errors name fields from `root` (the record's name, or the path at
/// which `value` was found inside a larger record).
pub fn from_value<'de, T: Deserialize<'de>>(
    value: &'de Value,
    root: &str,
) -> Result<T, FieldError> {
    let path = Path::Root(root);
    T::deserialize(Reader::new(value, &path)).map_err(|error| error.at(&path).into_field_error())
}

/// Parses `bytes` strictly (any white space and key order) and reads them as a `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8], root: &str) -> Result<T, FieldError> {
    from_slice_within(bytes, root, super::MAX_BYTES)
}

/// [`from_slice`] for a record with its own bound of `limit` bytes.
pub fn from_slice_within<T: DeserializeOwned>(
    bytes: &[u8],
    root: &str,
    limit: usize,
) -> Result<T, FieldError> {
    let value =
        super::parse_within(bytes, limit).map_err(|error| FieldError::json(root, &error))?;
    from_value(&value, root)
}

/// Parses `bytes` strictly, requires them to be exactly the canonical encoding of what they
/// hold, and reads them as a `T`: how stored records whose bytes are their identity are read.
pub fn from_canonical_slice<T: DeserializeOwned>(
    bytes: &[u8],
    root: &str,
) -> Result<T, FieldError> {
    let value = parse_canonical(bytes).map_err(|error| match error {
        CanonicalError::Json(error) => FieldError::json(root, &error),
        CanonicalError::NotCanonical => FieldError {
            kind: FieldErrorKind::NotCanonical,
            field: root.to_owned(),
            rule: error.to_string(),
        },
    })?;
    from_value(&value, root)
}

/// Where a value sits in the document, built only when an error needs it.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    Root(&'a str),
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Root(root) => f.write_str(root),
            Self::Key(parent, key) => {
                if matches!(parent, Self::Root("")) {
                    f.write_str(key)
                } else {
                    write!(f, "{parent}.{key}")
                }
            }
            Self::Index(parent, at) => write!(f, "{parent}[{at}]"),
        }
    }
}

/// The error type while reading: a [`FieldError`] whose path is filled in on the way out, at
/// the value it was raised for.
#[derive(Debug)]
pub(super) struct ReadError {
    kind: FieldErrorKind,
    rule: String,
    field: Option<String>,
    /// For unknown and missing fields: the key, below the object the error reaches first.
    key: Option<String>,
}

impl ReadError {
    fn new(kind: FieldErrorKind, rule: impl Into<String>) -> Self {
        Self {
            kind,
            rule: rule.into(),
            field: None,
            key: None,
        }
    }

    fn wrong(rule: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::WrongType, rule)
    }

    /// Gives the error the path of the value it was raised for, unless it has one already.
    fn at(mut self, path: &Path<'_>) -> Self {
        if self.field.is_none() {
            self.field = Some(match self.key.take() {
                Some(key) => Path::Key(path, &key).to_string(),
                None => path.to_string(),
            });
        }
        self
    }

    fn into_field_error(self) -> FieldError {
        FieldError {
            kind: self.kind,
            field: self.field.unwrap_or_default(),
            rule: self.rule,
        }
    }
}

impl Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rule)
    }
}

impl std::error::Error for ReadError {}

/// `a`, `a or b`, `a, b or c`.
pub(super) fn one_of(words: &[&str]) -> String {
    match words {
        [] => "nothing".into(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

impl de::Error for ReadError {
    fn custom<T: Display>(message: T) -> Self {
        Self::wrong(message.to_string())
    }

    fn invalid_type(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::wrong(format!("must be {expected}, not {unexpected}"))
    }

    fn invalid_value(unexpected: Unexpected<'_>, expected: &dyn Expected) -> Self {
        Self::wrong(format!("must be {expected}, not {unexpected}"))
    }

    fn invalid_length(len: usize, expected: &dyn Expected) -> Self {
        Self::wrong(format!("holds {len} items; must be {expected}"))
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        Self::wrong(format!("must be {}", one_of(expected)))
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        Self {
            key: Some(field.to_owned()),
            ..Self::new(
                FieldErrorKind::Unknown,
                format!(
                    "is not a field of this record (declared: {})",
                    expected.join(", ")
                ),
            )
        }
    }

    fn missing_field(field: &'static str) -> Self {
        Self {
            key: Some(field.to_owned()),
            ..Self::new(FieldErrorKind::Missing, "is required")
        }
    }

    fn duplicate_field(field: &'static str) -> Self {
        let error = JsonError::DuplicateKey {
            key: field.to_owned(),
        };
        Self::new(FieldErrorKind::Json(error.clone()), error.to_string())
    }
}

/// Reads one value at one path.
#[derive(Clone, Copy)]
struct Reader<'de, 'p> {
    value: &'de Value,
    path: &'p Path<'p>,
    /// Whether null was also acceptable here (the value of a nullable field), for messages.
    nullable: bool,
}

impl<'de, 'p> Reader<'de, 'p> {
    fn new(value: &'de Value, path: &'p Path<'p>) -> Self {
        Self {
            value,
            path,
            nullable: false,
        }
    }

    /// The value is not of the JSON type `what`.
    fn mismatch(&self, what: &str) -> ReadError {
        let or_null = if self.nullable { " or null" } else { "" };
        ReadError::wrong(format!(
            "must be {what}{or_null}, not {}",
            self.value.type_name()
        ))
    }

    fn integer(&self, min: i64, max: i64) -> Result<i64, ReadError> {
        let Value::Integer(number) = *self.value else {
            return Err(self.mismatch("an integer"));
        };
        if number < min || number > max {
            return Err(ReadError::wrong(if min == 0 && max >= MAX_SAFE_INTEGER {
                "must be a non-negative integer".to_owned()
            } else {
                format!("must be an integer from {min} to {max}")
            }));
        }
        Ok(number)
    }
}

/// The integer bounds of a Rust integer type, within the safe range.
macro_rules! integers {
    ($($method:ident: $ty:ty => $visit:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
                let min = i64::try_from(<$ty>::MIN).unwrap_or(i64::MIN).max(-MAX_SAFE_INTEGER);
                let max = i64::try_from(<$ty>::MAX).unwrap_or(i64::MAX).min(MAX_SAFE_INTEGER);
                let number = self.integer(min, max)?;
                // Within the type's bounds, checked above.
                visitor.$visit(number as $ty)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Reader<'de, '_> {
    type Error = ReadError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(flag) => visitor.visit_bool(*flag),
            Value::Integer(number) if *number >= 0 => visitor.visit_u64(*number as u64),
            Value::Integer(number) => visitor.visit_i64(*number),
            Value::String(text) => visitor.visit_borrowed_str(text),
            Value::Array(_) => self.deserialize_seq(visitor),
            Value::Object(_) => self.deserialize_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.value {
            Value::Bool(flag) => visitor.visit_bool(*flag),
            _ => Err(self.mismatch("true or false")),
        }
    }

    integers! {
        deserialize_i8: i8 => visit_i8,
        deserialize_i16: i16 => visit_i16,
        deserialize_i32: i32 => visit_i32,
        deserialize_i64: i64 => visit_i64,
        deserialize_i128: i128 => visit_i128,
        deserialize_u8: u8 => visit_u8,
        deserialize_u16: u16 => visit_u16,
        deserialize_u32: u32 => visit_u32,
        deserialize_u64: u64 => visit_u64,
        deserialize_u128: u128 => visit_u128,
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        // Canonical JSON has no fractions; an integer is still a number.
        match self.value {
            Value::Integer(number) => visitor.visit_i64(*number),
            _ => Err(self.mismatch("an integer")),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.value {
            Value::String(text) => visitor.visit_borrowed_str(text),
            _ => Err(self.mismatch("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(Reader {
                nullable: true,
                ..self
            }),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            _ => Err(self.mismatch("null")),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        let Value::Array(items) = self.value else {
            return Err(self.mismatch("an array"));
        };
        let mut access = Items {
            items: items.iter(),
            at: 0,
            path: self.path,
        };
        let value = visitor.visit_seq(&mut access)?;
        if access.items.len() > 0 {
            return Err(ReadError::wrong(format!(
                "holds {} items; must hold {}",
                items.len(),
                access.at
            )));
        }
        Ok(value)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        let Value::Object(entries) = self.value else {
            return Err(self.mismatch("an object"));
        };
        visitor.visit_map(Entries {
            entries: entries.iter(),
            value: None,
            path: self.path,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        match self.value {
            Value::String(variant) => visitor.visit_enum(variant.as_str().into_deserializer()),
            Value::Object(entries) if entries.len() == 1 => {
                let (variant, value) = entries.iter().next().expect("one entry");
                let path = Path::Key(self.path, variant);
                visitor
                    .visit_enum(VariantReader {
                        variant,
                        value: Reader::new(value, &path),
                    })
                    .map_err(|error| error.at(&path))
            }
            _ => Err(self.mismatch(&one_of(variants))),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        visitor.visit_unit()
    }
}

/// The items of an array, each read at its index.
struct Items<'de, 'p> {
    items: std::slice::Iter<'de, Value>,
    at: usize,
    path: &'p Path<'p>,
}

impl<'de> de::SeqAccess<'de> for Items<'de, '_> {
    type Error = ReadError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, ReadError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let path = Path::Index(self.path, self.at);
        self.at += 1;
        seed.deserialize(Reader::new(item, &path))
            .map(Some)
            .map_err(|error| error.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// The entries of an object, in key order, each value read at its key.
struct Entries<'de, 'p> {
    entries: std::collections::btree_map::Iter<'de, String, Value>,
    value: Option<(&'de str, &'de Value)>,
    path: &'p Path<'p>,
}

impl<'de> de::MapAccess<'de> for Entries<'de, '_> {
    type Error = ReadError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, ReadError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((key, value));
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, ReadError> {
        let (key, value) = self
            .value
            .take()
            .ok_or_else(|| ReadError::wrong("a value asked for before its key"))?;
        let path = Path::Key(self.path, key);
        seed.deserialize(Reader::new(value, &path))
            .map_err(|error| error.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A variant written as an object of one key (`{"<variant>": <content>}`).
struct VariantReader<'de, 'p> {
    variant: &'de str,
    value: Reader<'de, 'p>,
}

impl<'de, 'p> de::EnumAccess<'de> for VariantReader<'de, 'p> {
    type Error = ReadError;
    type Variant = Reader<'de, 'p>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Reader<'de, 'p>), ReadError> {
        let variant = seed.deserialize(de::value::BorrowedStrDeserializer::new(self.variant))?;
        Ok((variant, self.value))
    }
}

impl<'de> de::VariantAccess<'de> for Reader<'de, '_> {
    type Error = ReadError;

    fn unit_variant(self) -> Result<(), ReadError> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, ReadError> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, ReadError> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        de::Deserializer::deserialize_map(self, visitor)
    }
}

/// A [`Value`] reads any JSON that canonical JSON can hold, from any deserializer: a fraction
/// or an integer beyond ±(2^53 − 1) is refused, and so is a key given twice.
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value with integer numbers")
    }

    fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Value, E> {
        Ok(Value::Bool(flag))
    }

    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Value, E> {
        if number.unsigned_abs() > MAX_SAFE_INTEGER as u64 {
            return Err(E::invalid_value(
                Unexpected::Signed(number),
                &"an integer within ±(2^53 − 1)",
            ));
        }
        Ok(Value::Integer(number))
    }

    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Value, E> {
        match i64::try_from(number) {
            Ok(number) => self.visit_i64(number),
            Err(_) => Err(E::invalid_value(
                Unexpected::Unsigned(number),
                &"an integer within ±(2^53 − 1)",
            )),
        }
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Value, E> {
        Err(E::invalid_type(Unexpected::Float(number), &self))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
        Ok(Value::String(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Value, E> {
        Ok(Value::String(text))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Value::deserialize(deserializer)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = std::collections::BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if entries.contains_key(&key) {
                return Err(de::Error::custom(JsonError::DuplicateKey { key }));
            }
            let value = map.next_value()?;
            entries.insert(key, value);
        }
        Ok(Value::Object(entries))
    }
}

/// A digest reads itself from its text, refusing anything but `sha256:` and 64 lowercase hex
/// characters.
impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor {
            parse: Digest::parse,
            rule: DIGEST_RULE,
        })
    }
}

/// The rule a digest's text follows.
pub const DIGEST_RULE: &str = "must be sha256: followed by 64 lowercase hex characters";

/// Reads a value from its text form with `parse`; what does not parse breaks `rule`.
pub(crate) struct TextVisitor<T> {
    pub(crate) parse: fn(&str) -> Option<T>,
    pub(crate) rule: &'static str,
}

impl<T> Visitor<'_> for TextVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        (self.parse)(text).ok_or_else(|| E::custom(self.rule))
    }
}
