//! Owned repositories: create, open, seal, export.
