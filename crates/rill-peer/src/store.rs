//! The cluster state on disk: `<data>/meta/cluster.state`, the codec's
//! bytes written atomically (temporary file, fsync, rename, fsync of the
//! directory), so a crash leaves the old state or the new one.

use crate::StateError;
use rill_cluster::{codec, ClusterState};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn new(data_dir: &Path) -> StateFile {
        StateFile {
            path: data_dir.join("meta").join("cluster.state"),
        }
    }

    /// The state kept, if any. A state that does not decode stops the
    /// node: starting afresh would make it a cluster of its own.
    pub fn load(&self) -> Result<Option<ClusterState>, StateError> {
        match fs::read(&self.path) {
            Ok(b) => codec::decode(&b).map(Some).map_err(StateError::Damaged),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StateError::Read(e)),
        }
    }

    pub fn save(&self, state: &ClusterState) -> std::io::Result<()> {
        let dir = self.path.parent().expect("meta/ has a parent");
        fs::create_dir_all(dir)?;
        let tmp = dir.join("cluster.state.tmp");
        {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&codec::encode(state))?;
            f.sync_all()?;
        }
        fs::rename(&tmp, &self.path)?;
        fs::File::open(dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_state_loads_and_a_damaged_one_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let f = StateFile::new(dir.path());
        assert_eq!(f.load().unwrap(), None);
        let s = ClusterState::new("c", "a@h", 8);
        f.save(&s).unwrap();
        assert_eq!(f.load().unwrap(), Some(s));
        let path = dir.path().join("meta/cluster.state");
        let mut b = fs::read(&path).unwrap();
        b[12] ^= 1;
        fs::write(&path, b).unwrap();
        let e = f.load().unwrap_err().to_string();
        assert!(
            e.contains("cannot be read") && !e.contains(dir.path().to_str().unwrap()),
            "{e}"
        );
    }
}
