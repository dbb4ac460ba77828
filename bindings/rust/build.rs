// Links the static libkiln from the build directory named by KILN_BUILD_DIR,
// together with what libkiln itself needs (OpenBLAS, the C++ runtime, libdl), and
// writes the elementwise ops from the C API's op lists that the kiln build generates
// from its op registry (<build>/generated/include/kiln/c/kiln_{unary,binary}_ops.def).
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

// The op names of a generated list: its `MACRO(name)` lines.
fn op_names(def: &Path, macro_name: &str) -> Vec<String> {
    let text = fs::read_to_string(def).unwrap_or_else(|e| {
        panic!("cannot read {} ({e}); build kiln first and set KILN_BUILD_DIR", def.display())
    });
    let prefix = format!("{macro_name}(");
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|l| l.trim_end_matches(')').to_string())
        .collect()
}

fn write_elementwise(dir: &Path) {
    let lists = dir.join("generated/include/kiln/c");
    let unary = op_names(&lists.join("kiln_unary_ops.def"), "KILN_C_UNARY");
    let binary = op_names(&lists.join("kiln_binary_ops.def"), "KILN_C_BINARY");
    let mut sys = String::from("extern \"C\" {\n");
    for n in &unary {
        sys += &format!("    pub fn kiln_{n}(out: *mut kiln_array, a: kiln_array) -> c_int;\n");
    }
    for n in &binary {
        sys += &format!("    pub fn kiln_{n}(out: *mut kiln_array, a: kiln_array, b: kiln_array) -> c_int;\n");
    }
    sys += "}\n";
    let pairs = |names: &[String]| names.iter().map(|n| format!("{n}: kiln_{n}")).collect::<Vec<_>>().join(", ");
    let ops = format!("unary_ops!({});\nbinary_ops!({});\n", pairs(&unary), pairs(&binary));
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    fs::write(out.join("elementwise_sys.rs"), sys).unwrap();
    fs::write(out.join("elementwise_ops.rs"), ops).unwrap();
    for def in ["kiln_unary_ops.def", "kiln_binary_ops.def"] {
        println!("cargo:rerun-if-changed={}", lists.join(def).display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=KILN_BUILD_DIR");
    let dir = match env::var_os("KILN_BUILD_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            // A default that works for an in-tree build at <repo>/build.
            let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
            manifest.join("../../build")
        }
    };
    write_elementwise(&dir);
    let lib = dir.join("libkiln.a");
    if !lib.exists() {
        println!(
            "cargo:warning=libkiln.a not found in {}; set KILN_BUILD_DIR to a kiln build directory",
            dir.display()
        );
    }
    println!("cargo:rerun-if-changed={}", lib.display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=kiln");
    for l in ["openblas", "stdc++", "m", "dl", "pthread"] {
        println!("cargo:rustc-link-lib=dylib={l}");
    }
}
