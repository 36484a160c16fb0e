//! Input files named on the command line: files and directories of `.json`
//! files, checked up front so that bad input stops a run before it starts.

use crate::common::BadInput;
use std::path::{Path, PathBuf};

/// The `.json` files of each directory (sorted by name, not recursive) and
/// each file as given, de-duplicated by file name (the MaskBench id): the
/// first occurrence wins, as in peerbench's `collect_files`.
pub fn collect_json_files(args: &[String]) -> Result<Vec<PathBuf>, BadInput> {
    let mut files = Vec::new();
    for arg in args {
        let path = Path::new(arg);
        if path.is_dir() {
            files.extend(json_files_in(path)?);
        } else if path.is_file() {
            files.push(path.to_path_buf());
        } else {
            return Err(BadInput(format!("no such file or directory: {arg}")));
        }
    }
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| seen.insert(f.file_name().map(|n| n.to_os_string())));
    Ok(files)
}

/// The `.json` files directly in `dir`, sorted by name.
pub fn json_files_in(dir: &Path) -> Result<Vec<PathBuf>, BadInput> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| BadInput(format!("cannot read directory {}: {e}", dir.display())))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| BadInput(format!("cannot read directory {}: {e}", dir.display())))?;
        let path = entry.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "json") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_sorted_files_deduplicated_missing_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.json", "a.json", "notes.txt"] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
        }
        let sub = tempfile::tempdir().unwrap();
        std::fs::write(sub.path().join("a.json"), "{}").unwrap();
        let args = vec![
            dir.path().display().to_string(),
            sub.path().join("a.json").display().to_string(),
        ];
        let files = collect_json_files(&args).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.json", "b.json"]);
        assert_eq!(files[0].parent().unwrap(), dir.path());
        let err = collect_json_files(&["/nonexistent/x.json".to_string()]).unwrap_err();
        assert!(err.0.contains("/nonexistent/x.json"));
    }
}
