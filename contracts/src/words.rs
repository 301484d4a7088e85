//! Enums whose variants are written as words (`base`/`candidate`, `blob`/`tree`/`commit`),
//! declared with one table by [`word_enum!`](crate::word_enum): the word of each variant
//! (`as_str`), the variant of each word (`parse`), every variant (`ALL`), and serde impls
//! that write and read the word, all from that table.
//!
//! ```
//! sf_contracts::word_enum! {
//!     /// Where a check runs.
//!     #[derive(Clone, Copy, Debug, PartialEq, Eq)]
//!     pub enum Stage {
//!         /// The base.
//!         "base" Base,
//!         /// The Candidate.
//!         "candidate" Candidate,
//!     }
//! }
//! assert_eq!(Stage::Base.as_str(), "base");
//! assert_eq!(Stage::parse("candidate"), Some(Stage::Candidate));
//! assert_eq!(Stage::parse("Base"), None);
//! assert_eq!(Stage::ALL, &[Stage::Base, Stage::Candidate]);
//! let error = sf_contracts::canonical::from_slice::<Stage>(br#""other""#, "stage").unwrap_err();
//! assert_eq!(error.to_string(), "stage: must be base or candidate");
//! ```

/// Declares an enum of word-written variants from one table; see [the module](self). The
/// enum must be `Copy`.
#[macro_export]
macro_rules! word_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $word:literal $variant:ident
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];
            /// Every word, in declaration order.
            pub const WORDS: &'static [&'static str] = &[$($word),*];

            /// The word this variant is written as.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)*
                }
            }

            /// The variant written `word`, if it is one of [`Self::WORDS`].
            pub fn parse(word: &str) -> Option<Self> {
                match word {
                    $($word => Some(Self::$variant),)*
                    _ => None,
                }
            }
        }

        impl $crate::canonical::literal::__serde::Serialize for $name {
            fn serialize<S: $crate::canonical::literal::__serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::core::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::canonical::literal::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::canonical::literal::__serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::core::result::Result<Self, D::Error> {
                deserializer.deserialize_str($crate::words::WordVisitor {
                    parse: Self::parse,
                    words: Self::WORDS,
                })
            }
        }
    };
}

/// Reads a word-written variant: one of `words`, through `parse`.
#[doc(hidden)]
pub struct WordVisitor<T> {
    pub parse: fn(&str) -> Option<T>,
    pub words: &'static [&'static str],
}

impl<T> serde::de::Visitor<'_> for WordVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "one of {}", self.words.join(", "))
    }

    fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<T, E> {
        (self.parse)(word).ok_or_else(|| E::unknown_variant(word, self.words))
    }
}
