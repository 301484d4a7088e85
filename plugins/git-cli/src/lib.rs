//! sf-git-cli: the ObjectStore over the git binary.
