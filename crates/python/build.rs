//! Link arguments for an extension module that leaves Python's symbols to the
//! interpreter that loads it (needed on macOS; nothing on Linux).

fn main() {
    pyo3_build_config::add_extension_module_link_args();
}
