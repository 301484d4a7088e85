//! The errors of the contracts, each declared once by `contract_error!`: a variant's stable
//! kebab-case code and its named fields come from one table, from which the display text
//! (through `thiserror`), [`ContractError::code`], [`ContractError::fields`] and
//! [`ContractError::read`] are all generated. An encoding (the plugin wire, a report) walks
//! the fields; a decoder asks for a code's fields by name; neither repeats the table.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

/// One field of an error, as an encoder sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValue<'a> {
    /// A text field.
    Text(&'a str),
    /// A field of raw bytes (a path, which need not be UTF-8).
    Bytes(&'a [u8]),
}

/// Where a decoder reads an error's fields from: each is asked for once, by name.
pub trait FieldSource {
    /// Why a field is absent or of the wrong kind.
    type Error;
    /// The text field `name`.
    fn text(&mut self, name: &'static str) -> Result<String, Self::Error>;
    /// The byte field `name`.
    fn bytes(&mut self, name: &'static str) -> Result<Vec<u8>, Self::Error>;
}

/// A type an error field may have.
pub trait ErrorField: Sized {
    /// The field as an encoder writes it.
    fn value(&self) -> FieldValue<'_>;
    /// The field `name`, read from `source`.
    fn read<S: FieldSource>(source: &mut S, name: &'static str) -> Result<Self, S::Error>;
}

impl ErrorField for String {
    fn value(&self) -> FieldValue<'_> {
        FieldValue::Text(self)
    }

    fn read<S: FieldSource>(source: &mut S, name: &'static str) -> Result<Self, S::Error> {
        source.text(name)
    }
}

/// Rules are `&'static str` in the contracts (each is a constant of the code that checks
/// it); a rule read from elsewhere is interned ([`intern_rule`]).
impl ErrorField for &'static str {
    fn value(&self) -> FieldValue<'_> {
        FieldValue::Text(self)
    }

    fn read<S: FieldSource>(source: &mut S, name: &'static str) -> Result<Self, S::Error> {
        source.text(name).map(intern_rule)
    }
}

impl ErrorField for PathBuf {
    fn value(&self) -> FieldValue<'_> {
        FieldValue::Bytes(self.as_os_str().as_bytes())
    }

    fn read<S: FieldSource>(source: &mut S, name: &'static str) -> Result<Self, S::Error> {
        source
            .bytes(name)
            .map(|bytes| PathBuf::from(OsString::from_vec(bytes)))
    }
}

/// An error of a contract: a closed set of variants, each with a stable code and named
/// fields. Implemented by `contract_error!` only.
pub trait ContractError: std::error::Error + Sized {
    /// Every code, in declaration order.
    const CODES: &'static [&'static str];
    /// The stable kebab-case code of this error.
    fn code(&self) -> &'static str;
    /// Every field of this error with its name, in declaration order.
    fn fields(&self) -> Vec<(&'static str, FieldValue<'_>)>;
    /// The error of `code` with its fields read from `source`; `None` when `code` is not one
    /// of [`Self::CODES`].
    fn read<S: FieldSource>(code: &str, source: &mut S) -> Option<Result<Self, S::Error>>;
}

/// Declares a contract's error enum from its table: for each variant, its code, its display
/// text (a `thiserror` `#[error]` attribute) and its fields.
///
/// ```text
/// contract_error! {
///     /// Why a gate gave no answer.
///     #[derive(Clone, Debug, PartialEq, Eq)]
///     pub enum GateError {
///         /// The gate's source could not be read.
///         #[error("gate unavailable: {reason}")]
///         "unavailable" Unavailable { reason: String },
///         /// The deadline passed.
///         #[error("gate did not answer before its deadline")]
///         "timeout" Timeout,
///     }
/// }
/// ```
macro_rules! contract_error {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $code:literal $variant:ident $({
                    $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
                })?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(thiserror::Error)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant $({ $( $(#[$fmeta])* $field: $ty ),* })?,
            )*
        }

        impl $name {
            /// The stable kebab-case code of this error.
            pub fn code(&self) -> &'static str {
                match self {
                    $( Self::$variant { .. } => $code, )*
                }
            }
        }

        impl $crate::error_fields::ContractError for $name {
            const CODES: &'static [&'static str] = &[$($code),*];

            fn code(&self) -> &'static str {
                $name::code(self)
            }

            fn fields(&self) -> Vec<(&'static str, $crate::error_fields::FieldValue<'_>)> {
                #[allow(unused_mut)]
                let mut fields = Vec::new();
                match self {
                    $(
                        Self::$variant $({ $($field),* })? => {
                            $($(
                                fields.push((
                                    stringify!($field),
                                    $crate::error_fields::ErrorField::value($field),
                                ));
                            )*)?
                        }
                    )*
                }
                fields
            }

            // A closure per variant lets `?` stop at the first missing field.
            #[allow(clippy::redundant_closure_call)]
            fn read<S: $crate::error_fields::FieldSource>(
                code: &str,
                #[allow(unused_variables)] source: &mut S,
            ) -> Option<Result<Self, S::Error>> {
                match code {
                    $(
                        $code => Some((|| {
                            Ok(Self::$variant $({ $(
                                $field: <$ty as $crate::error_fields::ErrorField>::read(
                                    source,
                                    stringify!($field),
                                )?,
                            )* })?)
                        })()),
                    )*
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use contract_error;

/// The most distinct rule texts interned; past it, a fixed text stands in.
const MAX_INTERNED_RULES: usize = 4096;
/// The longest rule text interned.
const MAX_RULE_BYTES: usize = 4096;

/// The contracts' `InvalidInput` errors carry their rule as `&'static str`. A rule read from
/// outside (across the plugin ABI) is a `String`, so each distinct text is leaked once; the
/// table (shared by every contract) is bounded so that a hostile plugin cannot grow it
/// without limit.
pub fn intern_rule(rule: String) -> &'static str {
    static RULES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    const NOT_KEPT: &str =
        "(the plugin's rule text was not kept: too many distinct or too long rule texts)";
    if rule.len() > MAX_RULE_BYTES {
        return NOT_KEPT;
    }
    let mut rules = RULES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = rules.get(rule.as_str()) {
        return found;
    }
    if rules.len() >= MAX_INTERNED_RULES {
        return NOT_KEPT;
    }
    let leaked: &'static str = Box::leak(rule.into_boxed_str());
    rules.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    contract_error! {
        /// A test error with every field kind.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Sample {
            /// Text and a rule.
            #[error("bad {input}: {rule}")]
            "bad-input" BadInput { input: String, rule: &'static str },
            /// A path.
            #[error("{} exists", path.display())]
            "exists" Exists { path: PathBuf },
            /// No fields.
            #[error("aborted")]
            "aborted" Aborted,
        }
    }

    #[derive(Default)]
    struct Map(BTreeMap<&'static str, FieldValue<'static>>);

    impl FieldSource for Map {
        type Error = &'static str;
        fn text(&mut self, name: &'static str) -> Result<String, &'static str> {
            match self.0.remove(name) {
                Some(FieldValue::Text(text)) => Ok(text.to_owned()),
                _ => Err(name),
            }
        }
        fn bytes(&mut self, name: &'static str) -> Result<Vec<u8>, &'static str> {
            match self.0.remove(name) {
                Some(FieldValue::Bytes(bytes)) => Ok(bytes.to_vec()),
                _ => Err(name),
            }
        }
    }

    #[test]
    fn one_table_gives_codes_fields_and_reads() {
        assert_eq!(Sample::CODES, &["bad-input", "exists", "aborted"]);
        let error = Sample::BadInput {
            input: "x".into(),
            rule: "must be y",
        };
        assert_eq!(error.code(), "bad-input");
        assert_eq!(error.to_string(), "bad x: must be y");
        assert_eq!(
            error.fields(),
            vec![
                ("input", FieldValue::Text("x")),
                ("rule", FieldValue::Text("must be y"))
            ]
        );
        let mut source = Map::default();
        source.0.insert("input", FieldValue::Text("x"));
        source.0.insert("rule", FieldValue::Text("must be y"));
        assert_eq!(Sample::read("bad-input", &mut source), Some(Ok(error)));

        let path = Sample::Exists {
            path: PathBuf::from(OsString::from_vec(b"/a\xff".to_vec())),
        };
        assert_eq!(path.fields(), vec![("path", FieldValue::Bytes(b"/a\xff"))]);
        let mut source = Map::default();
        source.0.insert("path", FieldValue::Bytes(b"/a\xff"));
        assert_eq!(Sample::read("exists", &mut source), Some(Ok(path)));

        assert!(Sample::Aborted.fields().is_empty());
        assert_eq!(
            Sample::read("aborted", &mut Map::default()),
            Some(Ok(Sample::Aborted))
        );
        // A missing or mistyped field is the source's error; an unknown code is None.
        assert_eq!(
            Sample::read("exists", &mut Map::default()),
            Some(Err("path"))
        );
        assert_eq!(Sample::read("other", &mut Map::default()), None);
    }

    #[test]
    fn interning_is_bounded() {
        let a = intern_rule("rule a".into());
        assert_eq!(a, "rule a");
        assert!(std::ptr::eq(a, intern_rule("rule a".into())));
        assert!(intern_rule("x".repeat(MAX_RULE_BYTES + 1)).starts_with("(the plugin's"));
    }
}
