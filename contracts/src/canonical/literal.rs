//! Fields of a fixed value, declared once per record type: the `protocol` string of every
//! record, and the few other constants a record carries (`objectFormat`, a file's `mode`).
//!
//! The record's own fields derive their serde impls with `#[serde(remote = "Self")]`, and
//! [`literal_fields!`](crate::literal_fields) then implements `Serialize` and `Deserialize`
//! around them: writing adds each literal field to the struct, and reading requires each
//! literal field to be present with exactly its value (`must be "sf-slice/1"`) and hides it
//! from the derived code, whose `deny_unknown_fields` still refuses every other key. So the
//! type is the record, with no wire copy of its fields, under any serde format.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, PartialEq, Serialize, Deserialize)]
//! #[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
//! struct Epoch {
//!     product_id: String,
//!     epoch: u64,
//! }
//! sf_contracts::literal_fields!(Epoch { "protocol": "sf-example/1" });
//!
//! let epoch = Epoch { product_id: "p".into(), epoch: 3 };
//! let bytes = sf_contracts::canonical::to_canonical_bytes(&epoch).unwrap();
//! assert_eq!(bytes, br#"{"epoch":3,"productId":"p","protocol":"sf-example/1"}"#);
//! let back: Epoch = sf_contracts::canonical::from_slice(&bytes, "epoch").unwrap();
//! assert_eq!(back, epoch);
//! let other = br#"{"epoch":3,"productId":"p","protocol":"sf-example/2"}"#;
//! let error = sf_contracts::canonical::from_slice::<Epoch>(other, "epoch").unwrap_err();
//! assert_eq!(error.to_string(), "epoch.protocol: must be \"sf-example/1\"");
//! ```

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::ser::{self, Impossible, Serialize, SerializeStruct};

use super::ser::refuse_serializing;

/// Implements `Serialize` and `Deserialize` for a struct whose derived impls are
/// `#[serde(remote = "Self")]`, adding fields of fixed value: `literal_fields!(Type {
/// "protocol": PROTOCOL, "objectFormat": "sha1" })`. `literal_fields!(serialize Type { … })`
/// or `literal_fields!(deserialize Type { … })` implements one of the two, for a type that
/// derives only one. See [the module](self).
#[macro_export]
macro_rules! literal_fields {
    ($type:ty { $($key:literal : $value:expr),+ $(,)? }) => {
        $crate::literal_fields!(serialize $type { $($key: $value),+ });
        $crate::literal_fields!(deserialize $type { $($key: $value),+ });
    };
    (serialize $type:ty { $($key:literal : $value:expr),+ $(,)? }) => {
        impl $crate::canonical::literal::__serde::Serialize for $type {
            fn serialize<S: $crate::canonical::literal::__serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                const LITERALS: &[(&str, &str)] = &[$(($key, $value)),+];
                <$type>::serialize(
                    self,
                    $crate::canonical::literal::WithLiterals::new(serializer, LITERALS),
                )
            }
        }
    };
    (deserialize $type:ty { $($key:literal : $value:expr),+ $(,)? }) => {
        impl<'de> $crate::canonical::literal::__serde::Deserialize<'de> for $type {
            fn deserialize<D: $crate::canonical::literal::__serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                const LITERALS: &[(&str, &str)] = &[$(($key, $value)),+];
                <$type>::deserialize(
                    $crate::canonical::literal::WithLiterals::new(deserializer, LITERALS),
                )
            }
        }
    };
}

#[doc(hidden)]
pub use serde as __serde;

/// A serializer or deserializer of one struct, adding (or requiring and removing) the literal
/// fields `literals` (`(key, value)` pairs).
pub struct WithLiterals<T> {
    inner: T,
    literals: &'static [(&'static str, &'static str)],
}

impl<T> WithLiterals<T> {
    /// Wraps the serializer or deserializer `inner` so that it adds or requires `literals`.
    pub fn new(inner: T, literals: &'static [(&'static str, &'static str)]) -> Self {
        Self { inner, literals }
    }
}

fn only_structs<E: ser::Error>() -> E {
    E::custom("literal fields belong to a struct with named fields")
}

/// Writing: the struct, then each literal field.
impl<S: ser::Serializer> ser::Serializer for WithLiterals<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = Impossible<S::Ok, S::Error>;
    type SerializeStruct = S::SerializeStruct;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<S::SerializeStruct, S::Error> {
        let mut state = self
            .inner
            .serialize_struct(name, len + self.literals.len())?;
        for (key, value) in self.literals {
            state.serialize_field(key, value)?;
        }
        Ok(state)
    }

    refuse_serializing! {
        only_structs();
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32),
        serialize_i64(i64), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32),
        serialize_u64(u64), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]), serialize_none(), serialize_unit(),
        serialize_unit_struct(&'static str),
        serialize_unit_variant(&'static str, u32, &'static str),
    }

    fn serialize_newtype_struct<T: ser::Serialize + ?Sized>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(only_structs())
    }
}

/// Reading: the struct's entries with each literal field checked and taken out.
impl<'de, D: de::Deserializer<'de>> de::Deserializer<'de> for WithLiterals<D> {
    type Error = D::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(
            name,
            fields,
            LiteralsVisitor {
                inner: visitor,
                literals: self.literals,
            },
        )
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, D::Error> {
        Err(de::Error::custom(
            "literal fields belong to a struct with named fields",
        ))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

struct LiteralsVisitor<V> {
    inner: V,
    literals: &'static [(&'static str, &'static str)],
}

impl<'de, V: Visitor<'de>> Visitor<'de> for LiteralsVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let mut entries = LiteralEntries {
            inner: map,
            literals: self.literals,
            seen: vec![false; self.literals.len()],
        };
        let value = self.inner.visit_map(&mut entries)?;
        for ((key, _), seen) in self.literals.iter().zip(&entries.seen) {
            if !seen {
                return Err(de::Error::missing_field(key));
            }
        }
        Ok(value)
    }
}

/// An object's entries as the derived code sees them: without the literal fields.
struct LiteralEntries<A> {
    inner: A,
    literals: &'static [(&'static str, &'static str)],
    seen: Vec<bool>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for LiteralEntries<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.inner.next_key::<String>()? {
            let Some(at) = self.literals.iter().position(|(name, _)| *name == key) else {
                return seed.deserialize(key.into_deserializer()).map(Some);
            };
            let (name, value) = self.literals[at];
            if self.seen[at] {
                return Err(de::Error::duplicate_field(name));
            }
            self.seen[at] = true;
            self.inner.next_value_seed(Exactly(value))?;
        }
        Ok(None)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(seed)
    }
}

/// A string that must be exactly the given text.
struct Exactly(&'static str);

impl<'de> DeserializeSeed<'de> for Exactly {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Exactly {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the string {:?}", self.0)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<(), E> {
        if text == self.0 {
            Ok(())
        } else {
            Err(E::custom(format!("must be {:?}", self.0)))
        }
    }
}
