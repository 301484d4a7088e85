//! sf-sdk: what plugin authors depend on.
pub use sf_host::contracts;
