// Links the static libkiln from the build directory named by KILN_BUILD_DIR,
// together with what libkiln itself needs (OpenBLAS, the C++ runtime, libdl).
use std::env;
use std::path::PathBuf;

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
    for l in ["openblas", "pcre2-8", "stdc++", "m", "dl", "pthread"] {
        println!("cargo:rustc-link-lib=dylib={l}");
    }
}
