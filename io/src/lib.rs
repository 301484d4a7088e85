//! sf-io: reading and showing input sf does not trust: directories opened and walked through
//! descriptors, never by re-resolving paths ([`dir_fd`]; a large tree's walk spread over the
//! cores in [`walk_map`]); private directories that sf alone may use ([`private_dir`]); and
//! outside text escaped before it reaches a terminal ([`text_escape`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod dir_fd;
pub mod private_dir;
pub mod text_escape;
pub mod walk_map;
