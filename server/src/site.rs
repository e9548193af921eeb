//! The built site (the wasm, its JS, the CSS, each hashed name with the `.br` and `.gz`
//! copies `scripts/compress-site.sh` made; and `public/`'s files): served from inside the
//! binary when one was embedded in it (`hero embed-site`), else from a directory
//! (`site_root`, for development).
//!
//! Embedding appends the site to a copy of the binary: a tar archive of the site's
//! directory and of the build's `hash.txt`, then a trailer of 16 bytes, the archive's length
//! (little-endian) and [`MAGIC`]. The program's own code never sees it; at start the
//! server reads the trailer at the end of its executable and, when there is one, the
//! archive into memory (a few MB: the files are what a first visit downloads anyway).
//! Stripping the binary (`strip`) drops the archive; Hero then serves the site's directory.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

/// The last 8 bytes of a binary that carries its site.
pub const MAGIC: &[u8; 8] = b"HEROSITE";
const TRAILER: u64 = 16;
/// The build's hashes, inside the archive (never served).
const HASHES: &str = "hash.txt";

/// The site's files, by their path under the site's root (`pkg/hero.<hash>.wasm`,
/// `favicon.svg`), each with the compressed copies the build made.
pub struct Embedded {
    files: HashMap<String, Bytes>,
    assets: app::Assets,
}

/// Where the site is served from.
#[derive(Clone)]
pub enum Site {
    Dir(PathBuf),
    Embedded(std::sync::Arc<Embedded>),
}

impl Site {
    /// The site `site_root` names when it is set, else the one inside this binary, else the
    /// directory of a development build (`default`).
    pub fn choose(
        site_root: Option<&Path>,
        default: impl FnOnce() -> PathBuf,
    ) -> anyhow::Result<Site> {
        if let Some(dir) = site_root {
            return Ok(Site::Dir(dir.to_owned()));
        }
        let exe = std::env::current_exe().context("cannot find this program's file")?;
        match Embedded::read(&exe)? {
            Some(e) => Ok(Site::Embedded(std::sync::Arc::new(e))),
            None => Ok(Site::Dir(default())),
        }
    }

    /// The built files' names pages link: from the embedded hashes, or from the `hash.txt`
    /// cargo-leptos leaves beside the binary.
    pub fn assets(&self) -> app::Assets {
        match self {
            Site::Embedded(e) => e.assets.clone(),
            Site::Dir(_) => std::env::current_exe()
                .ok()
                .and_then(|exe| std::fs::read_to_string(exe.parent()?.join(HASHES)).ok())
                .map(|h| app::Assets::from_hashes(&h))
                .unwrap_or_default(),
        }
    }

    /// Says where the site comes from, for the start-up log.
    pub fn describe(&self) -> String {
        match self {
            Site::Dir(d) => format!("the directory {}", d.display()),
            Site::Embedded(e) => format!("inside the binary ({} files)", e.files.len()),
        }
    }
}

impl Embedded {
    /// The site appended to the executable at `exe`, if it carries one.
    pub fn read(exe: &Path) -> anyhow::Result<Option<Embedded>> {
        let mut f =
            std::fs::File::open(exe).with_context(|| format!("cannot open {}", exe.display()))?;
        let Some((start, len)) = payload(&mut f)? else {
            return Ok(None);
        };
        let mut archive = vec![0; len as usize];
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut archive)
            .context("the site inside the binary is cut short")?;
        let mut files = HashMap::new();
        let mut entries = tar::Archive::new(&archive[..]);
        for entry in entries
            .entries()
            .context("the site inside the binary is no archive")?
        {
            let mut entry = entry.context("the site inside the binary is damaged")?;
            if entry.header().entry_type() != tar::EntryType::Regular {
                continue;
            }
            let name = entry
                .path()?
                .to_string_lossy()
                .trim_start_matches("./")
                .to_owned();
            let mut data = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut data)?;
            files.insert(name, Bytes::from(data));
        }
        let assets = files
            .remove(HASHES)
            .map(|h| app::Assets::from_hashes(&String::from_utf8_lossy(&h)))
            .unwrap_or_default();
        Ok(Some(Embedded { files, assets }))
    }

    /// The file at `path` (as requested: `/pkg/…`, `/favicon.svg`) in the encoding the
    /// request accepts best of those the build made: brotli, gzip, or as it is.
    pub fn serve(&self, path: &str, headers: &HeaderMap) -> Option<Response> {
        let name = path.strip_prefix('/')?;
        let raw = self.files.get(name)?;
        let accepts = |coding: &str| accepts_encoding(headers, coding);
        let (body, encoding) = [("br", ".br"), ("gzip", ".gz")]
            .into_iter()
            .find_map(|(coding, ext)| {
                let copy = self.files.get(&format!("{name}{ext}"))?;
                accepts(coding).then(|| (copy.clone(), Some(coding)))
            })
            .unwrap_or_else(|| (raw.clone(), None));
        let mime = mime_guess::from_path(name).first_or_octet_stream();
        let mut resp = (StatusCode::OK, body).into_response();
        let h = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(mime.as_ref()) {
            h.insert(header::CONTENT_TYPE, v);
        }
        if let Some(coding) = encoding {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
        }
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        Some(resp)
    }
}

/// Whether `Accept-Encoding` takes `coding` (named, and not with `q=0`).
fn accepts_encoding(headers: &HeaderMap, coding: &str) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            parts.next().is_some_and(|c| c.eq_ignore_ascii_case(coding))
                && !parts.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q <= 0.0)
                })
        })
}

/// Where the archive lies in `f`, if `f` ends with a site's trailer: (offset, length).
fn payload(f: &mut std::fs::File) -> anyhow::Result<Option<(u64, u64)>> {
    let size = f.metadata()?.len();
    if size < TRAILER {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER as usize];
    f.seek(SeekFrom::Start(size - TRAILER))?;
    f.read_exact(&mut trailer)?;
    if &trailer[8..] != MAGIC {
        return Ok(None);
    }
    let len = u64::from_le_bytes(trailer[..8].try_into().expect("8 bytes"));
    if len > size - TRAILER {
        bail!("the site inside the binary claims more bytes than the file holds");
    }
    Ok(Some((size - TRAILER - len, len)))
}

/// Writes `out`: the program at `exe` (without any site it carried) followed by the site in
/// `site` and the build's hashes in `hashes`. Written beside `out` and renamed over it, so
/// that `out` may be the running program itself. Answers with `out`'s size.
pub fn embed(exe: &Path, site: &Path, hashes: &Path, out: &Path) -> anyhow::Result<u64> {
    if !site.join("pkg").is_dir() {
        bail!(
            "{} holds no built site (no pkg/): build it with `cargo leptos build --release`",
            site.display()
        );
    }
    let hash_text = std::fs::read(hashes).with_context(|| {
        format!(
            "cannot read the build's hashes in {} (cargo leptos build writes them beside the binary)",
            hashes.display()
        )
    })?;
    // The wasm of a build without `--split` asks for a module no file provides.
    if !String::from_utf8_lossy(&hash_text)
        .lines()
        .any(|l| l.starts_with("split:"))
    {
        bail!(
            "{} names no split loader: the site was built without --split; build it with `cargo leptos build --release --split`",
            hashes.display()
        );
    }
    let mut program =
        std::fs::File::open(exe).with_context(|| format!("cannot open {}", exe.display()))?;
    let program_len = match payload(&mut program)? {
        Some((start, _)) => start,
        None => program.metadata()?.len(),
    };
    let dir = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    program.seek(SeekFrom::Start(0))?;
    std::io::copy(&mut (&mut program).take(program_len), tmp.as_file_mut())?;
    let archive_start = program_len;
    {
        let mut tar = tar::Builder::new(tmp.as_file_mut());
        tar.follow_symlinks(true);
        tar.mode(tar::HeaderMode::Deterministic);
        tar.append_dir_all(".", site)
            .with_context(|| format!("cannot read the site in {}", site.display()))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(hash_text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, HASHES, &hash_text[..])?;
        tar.finish()?;
    }
    let file = tmp.as_file_mut();
    let end = file.stream_position()?;
    file.write_all(&(end - archive_start).to_le_bytes())?;
    file.write_all(MAGIC)?;
    file.sync_all()?;
    let mode = std::fs::metadata(exe)?.permissions();
    std::fs::set_permissions(tmp.path(), mode)?;
    tmp.persist(out)
        .with_context(|| format!("cannot replace {}", out.display()))?;
    Ok(end + TRAILER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_accepted_encoding_is_chosen() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::ACCEPT_ENCODING, v.parse().unwrap());
            m
        };
        assert!(accepts_encoding(&h("gzip, deflate, br, zstd"), "br"));
        assert!(accepts_encoding(&h("gzip;q=0.5"), "gzip"));
        assert!(!accepts_encoding(&h("br;q=0, gzip"), "br"));
        assert!(!accepts_encoding(&h("identity"), "gzip"));
        assert!(!accepts_encoding(&HeaderMap::new(), "br"));
    }
}
