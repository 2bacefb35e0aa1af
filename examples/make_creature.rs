//! Writes the creature of `examples/common/creature.rs` (mesh, skeleton, skin and its looping
//! walk animation "walk") as a binary glTF, `assets/creature/creature.glb`, the character the
//! `character` example loads with Bevy's glTF loader.
//!
//! ```text
//! cargo run --example make_creature [-- out.glb]
//! ```
//!
//! The file is written by this project and is CC0 (public domain), like the code that makes it.

#[path = "common/creature.rs"]
mod creature;

use bevy::mesh::{Indices, Mesh, VertexAttributeValues};
use serde_json::{Value, json};

/// Samples per second of the baked animation.
const SAMPLE_RATE: f32 = 30.0;

/// The binary chunk being filled, and the views and accessors that describe it.
#[derive(Default)]
struct Builder {
    bin: Vec<u8>,
    views: Vec<Value>,
    accessors: Vec<Value>,
}

impl Builder {
    /// Appends `bytes` as a buffer view (4-byte aligned); returns its index.
    fn view(&mut self, bytes: &[u8], target: Option<u32>) -> usize {
        while !self.bin.len().is_multiple_of(4) {
            self.bin.push(0);
        }
        let mut view = json!({
            "buffer": 0,
            "byteOffset": self.bin.len(),
            "byteLength": bytes.len(),
        });
        if let Some(t) = target {
            view["target"] = json!(t);
        }
        self.bin.extend_from_slice(bytes);
        self.views.push(view);
        self.views.len() - 1
    }

    /// A float accessor of `kind` ("SCALAR", "VEC2", ...) over `values` (`width` floats each);
    /// `bounds` adds min/max (required for positions and animation inputs).
    fn floats(&mut self, values: &[f32], width: usize, kind: &str, bounds: bool) -> usize {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = self.view(&bytes, None);
        let mut accessor = json!({
            "bufferView": view,
            "componentType": 5126,
            "count": values.len() / width,
            "type": kind,
        });
        if bounds {
            let column = |k: usize| values.iter().skip(k).step_by(width).copied();
            let min: Vec<f32> = (0..width)
                .map(|k| column(k).fold(f32::INFINITY, f32::min))
                .collect();
            let max: Vec<f32> = (0..width)
                .map(|k| column(k).fold(f32::NEG_INFINITY, f32::max))
                .collect();
            accessor["min"] = json!(min);
            accessor["max"] = json!(max);
        }
        self.accessors.push(accessor);
        self.accessors.len() - 1
    }

    /// An accessor of integer components (`component`: 5123 u16, 5125 u32).
    fn integers(
        &mut self,
        bytes: &[u8],
        count: usize,
        component: u32,
        kind: &str,
        target: u32,
    ) -> usize {
        let view = self.view(bytes, Some(target));
        self.accessors.push(json!({
            "bufferView": view,
            "componentType": component,
            "count": count,
            "type": kind,
        }));
        self.accessors.len() - 1
    }
}

fn floats3(values: &VertexAttributeValues) -> Vec<f32> {
    match values {
        VertexAttributeValues::Float32x3(v) => v.iter().flatten().copied().collect(),
        VertexAttributeValues::Float32x2(v) => v.iter().flatten().copied().collect(),
        VertexAttributeValues::Float32x4(v) => v.iter().flatten().copied().collect(),
        other => panic!("unexpected attribute format {other:?}"),
    }
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "assets/creature/creature.glb".into());
    let mesh = creature::mesh();
    let joints = creature::joints();
    let attribute = |id| {
        mesh.attribute(id)
            .expect("the creature has every attribute")
    };
    let mut b = Builder::default();

    // The mesh primitive.
    let positions = b.floats(
        &floats3(attribute(Mesh::ATTRIBUTE_POSITION)),
        3,
        "VEC3",
        true,
    );
    let normals = b.floats(
        &floats3(attribute(Mesh::ATTRIBUTE_NORMAL)),
        3,
        "VEC3",
        false,
    );
    let uvs = b.floats(&floats3(attribute(Mesh::ATTRIBUTE_UV_0)), 2, "VEC2", false);
    let VertexAttributeValues::Uint16x4(joint_indices) = attribute(Mesh::ATTRIBUTE_JOINT_INDEX)
    else {
        panic!("joint indices are u16x4");
    };
    let joint_bytes: Vec<u8> = joint_indices
        .iter()
        .flatten()
        .flat_map(|j| j.to_le_bytes())
        .collect();
    let joint_accessor = b.integers(&joint_bytes, joint_indices.len(), 5123, "VEC4", 34962);
    let weights = b.floats(
        &floats3(attribute(Mesh::ATTRIBUTE_JOINT_WEIGHT)),
        4,
        "VEC4",
        false,
    );
    let Some(Indices::U32(indices)) = mesh.indices() else {
        panic!("u32 indices");
    };
    let index_bytes: Vec<u8> = indices.iter().flat_map(|i| i.to_le_bytes()).collect();
    let index_accessor = b.integers(&index_bytes, indices.len(), 5125, "SCALAR", 34963);

    // The eyes: a second mesh, hung from the head joint (not skinned).
    let (eye_p, eye_n, eye_i) = creature::eye_mesh();
    let eye_positions = b.floats(&eye_p.concat(), 3, "VEC3", true);
    let eye_normals = b.floats(&eye_n.concat(), 3, "VEC3", false);
    let eye_index_bytes: Vec<u8> = eye_i.iter().flat_map(|i| i.to_le_bytes()).collect();
    let eye_indices = b.integers(&eye_index_bytes, eye_i.len(), 5125, "SCALAR", 34963);

    // The skin: joints are nodes 1..=9 (node 0 is the creature, node 10 the mesh, 11-12 the
    // eyes).
    let inverse: Vec<f32> = creature::inverse_bindposes()
        .iter()
        .flat_map(|m| m.to_cols_array())
        .collect();
    let inverse_accessor = b.floats(&inverse, 16, "MAT4", false);
    let joint_node = |j: usize| j + 1;
    let locals = creature::bind_locals();
    let mut nodes = vec![json!({ "name": "creature", "children": [1, joints.len() + 1] })];
    for (j, joint) in joints.iter().enumerate() {
        let children: Vec<usize> = (0..joints.len())
            .filter(|&k| joints[k].parent == Some(j))
            .map(joint_node)
            .collect();
        let mut node = json!({
            "name": joint.name,
            "translation": locals[j].translation.to_array(),
        });
        if !children.is_empty() {
            node["children"] = json!(children);
        }
        nodes.push(node);
    }
    nodes.push(json!({ "name": "body", "mesh": 0, "skin": 0 }));
    let head = joints
        .iter()
        .position(|j| j.name == "head")
        .expect("a head");
    let eye_nodes: Vec<usize> = creature::eyes()
        .iter()
        .zip(["eye_l", "eye_r"])
        .map(|(at, name)| {
            nodes.push(json!({
                "name": name,
                "mesh": 1,
                "translation": (*at - joints[head].bind).to_array(),
            }));
            nodes.len() - 1
        })
        .collect();
    let head_node = &mut nodes[joint_node(head)];
    let mut children = head_node["children"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    children.extend(eye_nodes.iter().map(|&n| json!(n)));
    head_node["children"] = json!(children);

    // The walk, baked at SAMPLE_RATE: the root's translation and every joint's rotation.
    let samples = (creature::PERIOD * SAMPLE_RATE).round() as usize + 1;
    let times: Vec<f32> = (0..samples).map(|i| i as f32 / SAMPLE_RATE).collect();
    let poses: Vec<_> = times.iter().map(|&t| creature::pose(t)).collect();
    let input = b.floats(&times, 1, "SCALAR", true);
    let mut samplers = Vec::new();
    let mut channels = Vec::new();
    let root_path: Vec<f32> = poses
        .iter()
        .flat_map(|p| p[0].translation.to_array())
        .collect();
    let output = b.floats(&root_path, 3, "VEC3", false);
    samplers.push(json!({ "input": input, "output": output, "interpolation": "LINEAR" }));
    channels.push(json!({
        "sampler": samplers.len() - 1,
        "target": { "node": joint_node(0), "path": "translation" },
    }));
    for j in 0..joints.len() {
        // Consecutive rotations in one hemisphere, so linear blending takes the short way.
        let mut previous = poses[0][j].rotation;
        let rotations: Vec<f32> = poses
            .iter()
            .flat_map(|p| {
                let mut q = p[j].rotation;
                if q.dot(previous) < 0.0 {
                    q = -q;
                }
                previous = q;
                q.to_array()
            })
            .collect();
        let output = b.floats(&rotations, 4, "VEC4", false);
        samplers.push(json!({ "input": input, "output": output, "interpolation": "LINEAR" }));
        channels.push(json!({
            "sampler": samplers.len() - 1,
            "target": { "node": joint_node(j), "path": "rotation" },
        }));
    }
    while !b.bin.len().is_multiple_of(4) {
        b.bin.push(0);
    }

    let gltf = json!({
        "asset": {
            "version": "2.0",
            "generator": "bevy_deformable make_creature",
            "copyright": "CC0",
        },
        "scene": 0,
        "scenes": [{ "name": "creature", "nodes": [0] }],
        "nodes": nodes,
        "meshes": [{
            "name": "creature",
            "primitives": [{
                "attributes": {
                    "POSITION": positions,
                    "NORMAL": normals,
                    "TEXCOORD_0": uvs,
                    "JOINTS_0": joint_accessor,
                    "WEIGHTS_0": weights,
                },
                "indices": index_accessor,
                "material": 0,
            }],
        }, {
            "name": "eye",
            "primitives": [{
                "attributes": { "POSITION": eye_positions, "NORMAL": eye_normals },
                "indices": eye_indices,
                "material": 1,
            }],
        }],
        "materials": [{
            "name": "skin",
            "pbrMetallicRoughness": {
                "baseColorFactor": [0.95, 0.52, 0.3, 1.0],
                "metallicFactor": 0.0,
                "roughnessFactor": 0.55,
            },
        }, {
            "name": "eye",
            "pbrMetallicRoughness": {
                "baseColorFactor": [0.03, 0.03, 0.04, 1.0],
                "metallicFactor": 0.0,
                "roughnessFactor": 0.15,
            },
        }],
        "skins": [{
            "name": "creature",
            "inverseBindMatrices": inverse_accessor,
            "joints": (0..joints.len()).map(joint_node).collect::<Vec<_>>(),
            "skeleton": joint_node(0),
        }],
        "animations": [{ "name": "walk", "samplers": samplers, "channels": channels }],
        "buffers": [{ "byteLength": b.bin.len() }],
        "bufferViews": b.views,
        "accessors": b.accessors,
    });
    let mut json_bytes = serde_json::to_vec(&gltf).expect("serialisable");
    while !json_bytes.len().is_multiple_of(4) {
        json_bytes.push(b' ');
    }
    let total = 12 + 8 + json_bytes.len() + 8 + b.bin.len();
    let mut glb = Vec::with_capacity(total);
    glb.extend_from_slice(b"glTF");
    glb.extend_from_slice(&2u32.to_le_bytes());
    glb.extend_from_slice(&(total as u32).to_le_bytes());
    glb.extend_from_slice(&(json_bytes.len() as u32).to_le_bytes());
    glb.extend_from_slice(b"JSON");
    glb.extend_from_slice(&json_bytes);
    glb.extend_from_slice(&(b.bin.len() as u32).to_le_bytes());
    glb.extend_from_slice(b"BIN\0");
    glb.extend_from_slice(&b.bin);
    if let Some(dir) = std::path::Path::new(&out).parent() {
        std::fs::create_dir_all(dir).expect("output directory");
    }
    std::fs::write(&out, &glb).expect("write the glb");
    println!(
        "{out}: {} bytes, {} vertices, {} triangles, {} joints, {} animation samples",
        glb.len(),
        mesh.count_vertices(),
        indices.len() / 3,
        joints.len(),
        samples
    );
}
