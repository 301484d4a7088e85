//! The base tree as applying sees it: entries read through the caller's [`BaseFiles`], and
//! whether (and as what) each path exists remembered, since the path rules ask about the same
//! leading directories again and again.

use std::collections::HashMap;

use crate::{BaseEntry, BaseFiles, Mode, PatchError};

pub(crate) struct Base<'a> {
    files: &'a mut dyn BaseFiles,
    modes: HashMap<String, Option<Mode>>,
}

impl<'a> Base<'a> {
    pub(crate) fn new(files: &'a mut dyn BaseFiles) -> Self {
        Base {
            files,
            modes: HashMap::new(),
        }
    }

    /// The entry at `path`, None when the base has none there.
    pub(crate) fn read(&mut self, path: &str) -> Result<Option<BaseEntry>, PatchError> {
        let entry = self.files.read(path).map_err(|message| PatchError::Base {
            path: path.into(),
            message,
        })?;
        self.modes
            .insert(path.into(), entry.as_ref().map(|e| e.mode));
        Ok(entry)
    }

    /// The mode of the entry at `path`, None when the base has none there.
    pub(crate) fn mode(&mut self, path: &str) -> Result<Option<Mode>, PatchError> {
        if let Some(mode) = self.modes.get(path) {
            return Ok(*mode);
        }
        Ok(self.read(path)?.map(|e| e.mode))
    }
}
