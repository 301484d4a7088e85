//! sf-app: sf's use cases, each a function over a typed request that returns a typed result.
//!
//! The command line (sf-cli) parses its arguments into a request, calls one use case, and
//! renders what it answers; any other caller (a service, a test) calls the same functions.
//! Every rule of how sf is used lives here once: what is read and checked before anything
//! starts, which backends a step is given, that only a Verified Verdict (the judge's proof,
//! [`sf_host::judging::Verified`]) prepares an effect, and how a landing composes collection,
//! judgement, integration and delivery.
//!
//! | use case | module |
//! |---|---|
//! | create a repository, import a later base, record an upstream, list a commit's files | [`repo`] |
//! | freeze a Slice | [`freeze`] |
//! | seal a proposal | [`seal`] |
//! | export a Candidate's files | [`export`] |
//! | collect a Candidate's evidence | [`collect`] |
//! | judge it | [`judge`] |
//! | read evidence records, migrate a store | [`evidence`] |
//! | land it (collect, judge, integrate, and deliver) | [`land`] |
//! | integrate, deliver: prepare, invoke, inspect | [`integrate`], [`deliver`] |
//! | review it | [`review`] |
//! | what is known of a Candidate (show, list, report) | [`facts`] |
//! | dependency environments | [`env`] |
//! | oats capabilities as checks (staged at freeze and before each collection) | [`capabilities`] |
//! | attest a landing; check a commit's attestation anywhere | [`attest`], [`verify`] |
//!
//! Each use case takes the configured [`Backends`] and answers an [`AppError`] (a stable code
//! and a message naming the input at fault) when it refuses or fails.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod attest;
pub mod backends;
pub mod capabilities;
pub mod collect;
pub mod deliver;
pub mod effect;
pub mod env;
pub mod env_build;
pub mod error;
pub mod evidence;
pub mod export;
pub mod external;
pub mod facts;
pub mod files;
pub mod freeze;
pub mod input;
pub mod integrate;
pub mod judge;
pub mod land;
mod landing;
pub mod loaded;
pub mod preflight;
pub mod progress;
pub mod propose;
pub mod repo;
pub mod review;
pub mod seal;
pub mod slice_dir;
pub mod suggest;
pub mod verify;

pub use backends::Backends;
pub use error::AppError;
pub use landing::{LandOutcome, Landing};
pub use loaded::Target;
pub use progress::Progress;
