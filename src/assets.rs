//! Tet meshes as Bevy assets: TetGen `.node` (with its `.ele` beside it) and Gmsh `.msh`.
//!
//! Load errors surface as Bevy asset load failures carrying the typed message (file, line and
//! cause); the app keeps running and the body waiting for the mesh is simply never created.

use std::sync::Arc;

use bevy::asset::io::Reader;
use bevy::asset::{Asset, AssetLoader, LoadContext};
use bevy::reflect::TypePath;
use thiserror::Error;

use crate::sim::{MeshError, TetMesh};

/// A validated tet mesh shared by every body that uses it.
#[derive(Asset, TypePath, Debug, Clone)]
pub struct TetMeshAsset(pub Arc<TetMesh>);

/// Why a tet mesh asset failed to load.
#[derive(Debug, Error)]
pub enum TetMeshLoadError {
    /// The file (or the `.ele` beside a `.node`) could not be read.
    #[error("could not read {path}: {message}")]
    Read {
        /// The path.
        path: String,
        /// The reader's error.
        message: String,
    },
    /// The file is not valid UTF-8 text.
    #[error("{0} is not UTF-8 text")]
    NotText(String),
    /// The mesh is malformed or invalid.
    #[error("{path}: {source}")]
    Mesh {
        /// The path.
        path: String,
        /// The typed mesh error (line numbers for parse errors).
        source: MeshError,
    },
}

/// Loads TetGen `.node` files; the `.ele` file with the same stem is read from beside it.
#[derive(Debug, Default, TypePath)]
pub(crate) struct TetGenLoader;

/// Loads Gmsh ASCII `.msh` files (versions 2.2 and 4.1, tetrahedra only).
#[derive(Debug, Default, TypePath)]
pub(crate) struct GmshLoader;

async fn read_text(reader: &mut dyn Reader, path: &str) -> Result<String, TetMeshLoadError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| TetMeshLoadError::Read {
            path: path.to_string(),
            message: e.to_string(),
        })?;
    String::from_utf8(bytes).map_err(|_| TetMeshLoadError::NotText(path.to_string()))
}

impl AssetLoader for TetGenLoader {
    type Asset = TetMeshAsset;
    type Settings = ();
    type Error = TetMeshLoadError;

    async fn load(
        &self,
        reader: &mut dyn Reader,
        _settings: &(),
        load_context: &mut LoadContext<'_>,
    ) -> Result<TetMeshAsset, TetMeshLoadError> {
        let node_path = load_context.path().to_string();
        let node = read_text(reader, &node_path).await?;
        let ele_path = load_context.path().path().with_extension("ele");
        let ele_bytes = load_context
            .read_asset_bytes(ele_path.clone())
            .await
            .map_err(|e| TetMeshLoadError::Read {
                path: ele_path.display().to_string(),
                message: e.to_string(),
            })?;
        let ele = String::from_utf8(ele_bytes)
            .map_err(|_| TetMeshLoadError::NotText(ele_path.display().to_string()))?;
        let mesh = TetMesh::from_tetgen(&node, &ele).map_err(|source| TetMeshLoadError::Mesh {
            path: node_path,
            source,
        })?;
        Ok(TetMeshAsset(Arc::new(mesh)))
    }

    fn extensions(&self) -> &[&str] {
        &["node"]
    }
}

impl AssetLoader for GmshLoader {
    type Asset = TetMeshAsset;
    type Settings = ();
    type Error = TetMeshLoadError;

    async fn load(
        &self,
        reader: &mut dyn Reader,
        _settings: &(),
        load_context: &mut LoadContext<'_>,
    ) -> Result<TetMeshAsset, TetMeshLoadError> {
        let path = load_context.path().to_string();
        let text = read_text(reader, &path).await?;
        let mesh =
            TetMesh::from_gmsh(&text).map_err(|source| TetMeshLoadError::Mesh { path, source })?;
        Ok(TetMeshAsset(Arc::new(mesh)))
    }

    fn extensions(&self) -> &[&str] {
        &["msh"]
    }
}
