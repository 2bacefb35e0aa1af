//! Material presets, and the tuned settings of a scene saved to and loaded from a RON file.
//!
//! A [`SceneTuning`] holds everything a designer tunes live: the [`DeformableConfig`], the fixed
//! time step, the time scale, the grab stiffness, and the material of every *named* body (by its
//! [`Name`]; unnamed bodies are not saved). [`TuningPlugin`] loads the scene's file once the
//! scene has spawned (in `PostStartup`), so tuning survives a restart; [`SaveTuning`] and
//! [`LoadTuning`] messages save and reload it at run time (the inspector's buttons write them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bevy::app::{App, Plugin, PostStartup, Update};
use bevy::ecs::message::{Message, MessageReader};
use bevy::log::{info, warn};
use bevy::prelude::{Mut, Name, Query, ResMut, Resource, Time};
use bevy::time::{Fixed, Virtual};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::DeformableConfig;
use crate::components::SoftMaterial;
use crate::grab::GrabTool;
use crate::plugin::FLAT_FIELDS;

/// A named material preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaterialPreset {
    /// [`SoftMaterial::JELLY`].
    Jelly,
    /// [`SoftMaterial::RUBBER`].
    Rubber,
    /// [`SoftMaterial::FLESH`].
    Flesh,
    /// [`SoftMaterial::STIFF_FOAM`].
    StiffFoam,
}

impl MaterialPreset {
    /// Every preset, softest first.
    pub const ALL: [Self; 4] = [Self::Jelly, Self::Flesh, Self::Rubber, Self::StiffFoam];

    /// The name shown in the panel.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Jelly => "jelly",
            Self::Rubber => "rubber",
            Self::Flesh => "flesh",
            Self::StiffFoam => "stiff foam",
        }
    }

    /// The material.
    pub const fn material(self) -> SoftMaterial {
        match self {
            Self::Jelly => SoftMaterial::JELLY,
            Self::Rubber => SoftMaterial::RUBBER,
            Self::Flesh => SoftMaterial::FLESH,
            Self::StiffFoam => SoftMaterial::STIFF_FOAM,
        }
    }

    /// The preset `material` equals, if any.
    pub fn matching(material: &SoftMaterial) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.material() == *material)
    }
}

/// The tuned settings of a scene.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SceneTuning {
    /// The simulation settings (pause state excluded).
    pub config: DeformableConfig,
    /// The fixed time step (s).
    pub fixed_timestep: f64,
    /// Speed of virtual time relative to real time (1 = real time).
    pub time_scale: f32,
    /// Stiffness of the grab spring (N/m).
    pub grab_stiffness: f32,
    /// Materials of named bodies, by name.
    pub materials: BTreeMap<String, SoftMaterial>,
}

impl Default for SceneTuning {
    fn default() -> Self {
        Self {
            config: DeformableConfig::default(),
            fixed_timestep: 1.0 / 64.0,
            time_scale: 1.0,
            grab_stiffness: GrabTool::default().stiffness,
            materials: BTreeMap::new(),
        }
    }
}

/// Why tuning could not be saved or loaded.
#[derive(Debug, Error)]
pub enum TuningError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not valid tuning RON.
    #[error("{path}: not a tuning file: {message}")]
    Parse {
        /// The file (empty when parsing a string).
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The file's settings have the flat shape of earlier versions (`config: (substeps: 1,
    /// pd_iterations: 10, ..)`), not the grouped one (`config: (solver: (substeps: 1, ..),
    /// contact: (..), rest: (..))`); nothing is loaded. Move each setting to its group.
    #[error("{path}: the settings have the old flat shape: `{field}` is now `config.{now}`")]
    FlatConfig {
        /// The file (empty when parsing a string).
        path: PathBuf,
        /// The first setting found in the old place.
        field: String,
        /// Where it is now, under `config`.
        now: &'static str,
    },
    /// A value is out of range (non-finite time step, negative time scale, ...).
    #[error("invalid {0}")]
    Invalid(&'static str),
}

impl SceneTuning {
    /// The tuning as pretty RON text.
    pub fn to_ron(&self) -> String {
        ron::ser::to_string_pretty(self, ron::ser::PrettyConfig::default())
            .expect("SceneTuning has only serializable fields")
    }

    /// Parses RON text (fields missing from the text keep their defaults; unknown settings are
    /// refused).
    ///
    /// # Errors
    /// [`TuningError::Parse`], [`TuningError::FlatConfig`] (a file of the flat settings of
    /// earlier versions) or [`TuningError::Invalid`].
    pub fn from_ron(text: &str) -> Result<Self, TuningError> {
        let tuning: Self = ron::from_str(text).map_err(|e| {
            flat_config_field(&e.code).unwrap_or_else(|| TuningError::Parse {
                path: PathBuf::new(),
                message: e.to_string(),
            })
        })?;
        tuning.validate()?;
        Ok(tuning)
    }

    /// Writes the file (creating its directory).
    ///
    /// # Errors
    /// [`TuningError::Io`].
    pub fn save(&self, path: &Path) -> Result<(), TuningError> {
        let io = |source| TuningError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        std::fs::write(path, self.to_ron()).map_err(io)
    }

    /// Reads the file.
    ///
    /// # Errors
    /// [`TuningError::Io`] (a missing file included), [`TuningError::Parse`],
    /// [`TuningError::FlatConfig`], [`TuningError::Invalid`].
    pub fn load(path: &Path) -> Result<Self, TuningError> {
        let text = std::fs::read_to_string(path).map_err(|source| TuningError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_ron(&text).map_err(|e| match e {
            TuningError::Parse { message, .. } => TuningError::Parse {
                path: path.to_owned(),
                message,
            },
            TuningError::FlatConfig { field, now, .. } => TuningError::FlatConfig {
                path: path.to_owned(),
                field,
                now,
            },
            e => e,
        })
    }

    fn validate(&self) -> Result<(), TuningError> {
        if !(self.fixed_timestep.is_finite() && self.fixed_timestep > 0.0) {
            return Err(TuningError::Invalid("fixed_timestep (must be > 0 s)"));
        }
        if !(self.time_scale.is_finite() && self.time_scale >= 0.0) {
            return Err(TuningError::Invalid("time_scale (must be >= 0)"));
        }
        if !(self.grab_stiffness.is_finite() && self.grab_stiffness > 0.0) {
            return Err(TuningError::Invalid("grab_stiffness (must be > 0 N/m)"));
        }
        Ok(())
    }

    /// The tuning of a running scene.
    pub fn capture<'a>(
        config: &DeformableConfig,
        fixed: &Time<Fixed>,
        virtual_time: &Time<Virtual>,
        grab: &GrabTool,
        bodies: impl IntoIterator<Item = (&'a Name, &'a SoftMaterial)>,
    ) -> Self {
        let mut config = config.clone();
        config.paused = false;
        config.single_step = false;
        Self {
            config,
            fixed_timestep: fixed.timestep().as_secs_f64(),
            time_scale: virtual_time.relative_speed(),
            grab_stiffness: grab.stiffness,
            materials: bodies
                .into_iter()
                .map(|(name, m)| (name.as_str().to_owned(), *m))
                .collect(),
        }
    }

    /// Applies the tuning to a running scene: settings, clocks, grab stiffness, and the
    /// material of every body whose name it lists (others keep theirs). The pause state is
    /// kept. Returns how many bodies got a material.
    pub fn apply<'a>(
        &self,
        config: &mut DeformableConfig,
        fixed: &mut Time<Fixed>,
        virtual_time: &mut Time<Virtual>,
        grab: &mut GrabTool,
        bodies: impl IntoIterator<Item = (&'a Name, Mut<'a, SoftMaterial>)>,
    ) -> usize {
        let (paused, single_step) = (config.paused, config.single_step);
        *config = self.config.clone();
        config.paused = paused;
        config.single_step = single_step;
        fixed.set_timestep(Duration::from_secs_f64(self.fixed_timestep));
        virtual_time.set_relative_speed(self.time_scale);
        grab.stiffness = self.grab_stiffness;
        let mut applied = 0;
        for (name, mut material) in bodies {
            if let Some(m) = self.materials.get(name.as_str()) {
                if *material != *m {
                    *material = *m;
                }
                applied += 1;
            }
        }
        applied
    }
}

/// The typed error for a RON error that is a setting of the flat `DeformableConfig` of earlier
/// versions met where the grouped one has no such field.
fn flat_config_field(error: &ron::Error) -> Option<TuningError> {
    let ron::Error::NoSuchStructField { found, outer, .. } = error else {
        return None;
    };
    if outer.as_deref().is_some_and(|o| o != "DeformableConfig") {
        return None;
    }
    let &(_, now) = FLAT_FIELDS.iter().find(|(old, _)| *old == found.as_str())?;
    Some(TuningError::FlatConfig {
        path: PathBuf::new(),
        field: found.clone(),
        now,
    })
}

/// Where a scene's tuning is saved, and what happened last.
#[derive(Resource, Debug, Clone, PartialEq)]
pub struct TuningFile {
    /// The RON file.
    pub path: PathBuf,
    /// The outcome of the last save or load, for the panel.
    pub status: String,
}

/// Save the scene's tuning to its [`TuningFile`].
#[derive(Message, Debug, Clone, Copy, Default)]
pub struct SaveTuning;

/// Reload the scene's tuning from its [`TuningFile`].
#[derive(Message, Debug, Clone, Copy, Default)]
pub struct LoadTuning;

/// Saves and loads a scene's [`SceneTuning`] at `path`; loads it (if it exists) once the scene
/// has spawned. Needs [`crate::DeformablePlugin`].
#[derive(Debug, Clone)]
pub struct TuningPlugin {
    /// The RON file, e.g. `assets/tuning/my_scene.ron`.
    pub path: PathBuf,
}

impl Plugin for TuningPlugin {
    fn build(&self, app: &mut App) {
        app.insert_resource(TuningFile {
            path: self.path.clone(),
            status: String::new(),
        })
        .add_message::<SaveTuning>()
        .add_message::<LoadTuning>()
        .add_systems(PostStartup, load_on_start)
        .add_systems(Update, save_and_load);
    }
}

/// What [`save_and_load`] and [`load_on_start`] touch.
type TuningTargets<'w, 's> = (
    ResMut<'w, DeformableConfig>,
    ResMut<'w, Time<Fixed>>,
    ResMut<'w, Time<Virtual>>,
    ResMut<'w, GrabTool>,
    Query<'w, 's, (&'static Name, &'static mut SoftMaterial)>,
);

fn load_on_start(mut file: ResMut<TuningFile>, targets: TuningTargets) {
    if file.path.exists() {
        load_into(&mut file, targets);
    }
}

fn save_and_load(
    mut save: MessageReader<SaveTuning>,
    mut load: MessageReader<LoadTuning>,
    mut file: ResMut<TuningFile>,
    targets: TuningTargets,
) {
    let (save, load) = (save.read().count() > 0, load.read().count() > 0);
    if save {
        let (config, fixed, virtual_time, grab, bodies) = &targets;
        let tuning = SceneTuning::capture(config, fixed, virtual_time, grab, bodies.iter());
        file.status = match tuning.save(&file.path) {
            Ok(()) => format!(
                "saved {} materials to {}",
                tuning.materials.len(),
                file.path.display()
            ),
            Err(e) => format!("save failed: {e}"),
        };
        info!("{}", file.status);
    } else if load {
        load_into(&mut file, targets);
    }
}

fn load_into(file: &mut TuningFile, targets: TuningTargets) {
    let (mut config, mut fixed, mut virtual_time, mut grab, mut bodies) = targets;
    file.status = match SceneTuning::load(&file.path) {
        Ok(tuning) => {
            let n = tuning.apply(
                &mut config,
                &mut fixed,
                &mut virtual_time,
                &mut grab,
                bodies.iter_mut(),
            );
            let status = format!("loaded {} ({n} materials)", file.path.display());
            info!("{status}");
            status
        }
        Err(e) => {
            warn!("tuning not loaded: {e}");
            format!("load failed: {e}")
        }
    };
}

/// Serde for a Bevy `Vec3` as `(x, y, z)`, without Bevy's `serialize` feature.
pub(crate) mod vec3_serde {
    use bevy::math::Vec3;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Vec3, s: S) -> Result<S::Ok, S::Error> {
        (v.x, v.y, v.z).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec3, D::Error> {
        let (x, y, z) = <(f32, f32, f32)>::deserialize(d)?;
        Ok(Vec3::new(x, y, z))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::{CombineRule, StrainLimits};
    use crate::plugin::{ElasticModel, FrictionModel, SolverChoice};

    fn tuned() -> SceneTuning {
        let mut t = SceneTuning::default();
        t.config.gravity = bevy::math::Vec3::new(0.1, -9.7, 1.0 / 3.0);
        t.config.solver.pd_iterations = 17;
        t.config.contact.mprgp_tolerance = 3.3e-7;
        t.config.contact.friction_model = FrictionModel::Pyramid;
        t.config.solver.method = SolverChoice::NewtonMprgp;
        t.config.solver.fem_model = ElasticModel::StableNeoHookean;
        t.config.solver.newton_iterations = 3;
        t.config.contact.separate_regions = false;
        t.fixed_timestep = 1.0 / 97.0;
        t.time_scale = 0.37;
        t.grab_stiffness = 1234.5;
        let mut m = SoftMaterial::JELLY.with_youngs_modulus(12_345.679);
        m.friction_combine = CombineRule::Max;
        m.strain_limits = Some(StrainLimits {
            min_stretch: 0.91,
            max_stretch: 1.0 + f32::EPSILON,
            stiffness_scale: 7.0,
        });
        t.materials.insert("jelly \"cube\"".into(), m);
        t.materials.insert("ball".into(), SoftMaterial::FLESH);
        t
    }

    #[test]
    fn ron_round_trips_exactly() {
        let t = tuned();
        let text = t.to_ron();
        assert_eq!(SceneTuning::from_ron(&text).unwrap(), t);
        // And through a file.
        let dir =
            std::env::temp_dir().join(format!("bevy_deformable_tuning_{}", std::process::id()));
        let path = dir.join("nested").join("scene.ron");
        t.save(&path).unwrap();
        assert_eq!(SceneTuning::load(&path).unwrap(), t);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_fields_default_and_bad_files_are_typed_errors() {
        let t = SceneTuning::from_ron("(time_scale: 0.5)").unwrap();
        assert_eq!(t.time_scale, 0.5);
        assert_eq!(t.config, DeformableConfig::default());
        assert!(matches!(
            SceneTuning::from_ron("(time_scale: "),
            Err(TuningError::Parse { .. })
        ));
        assert!(matches!(
            SceneTuning::from_ron("(fixed_timestep: -1.0)"),
            Err(TuningError::Invalid(_))
        ));
        assert!(matches!(
            SceneTuning::load(Path::new("/nonexistent/dir/scene.ron")),
            Err(TuningError::Io { .. })
        ));
    }

    /// A file of the flat settings of earlier versions is refused with where the first old
    /// setting went; the grouped shape loads, and a setting in its group is read.
    #[test]
    fn a_flat_config_file_is_a_typed_error() {
        let flat = "(config: (gravity: (0.0, -9.81, 0.0), substeps: 2, pd_iterations: 5))";
        match SceneTuning::from_ron(flat) {
            Err(TuningError::FlatConfig { field, now, .. }) => {
                assert_eq!(field, "substeps");
                assert_eq!(now, "solver.substeps");
            }
            other => panic!("expected FlatConfig, got {other:?}"),
        }
        let flat = "(config: (contact_margin: 0.02))";
        assert!(matches!(
            SceneTuning::from_ron(flat),
            Err(TuningError::FlatConfig {
                now: "contact.margin",
                ..
            })
        ));
        let grouped = SceneTuning::from_ron("(config: (solver: (substeps: 2)))").unwrap();
        assert_eq!(grouped.config.solver.substeps, 2);
        assert_eq!(grouped.config.contact, DeformableConfig::default().contact);
        // Every old name maps to a field path of the grouped shape.
        let fields = SceneTuning::default().to_ron();
        for (old, now) in FLAT_FIELDS {
            let leaf = now.rsplit('.').next().unwrap();
            assert!(fields.contains(&format!("{leaf}:")), "{old} -> {now}");
        }
    }

    #[test]
    fn presets_are_found_by_value() {
        for p in MaterialPreset::ALL {
            assert_eq!(MaterialPreset::matching(&p.material()), Some(p));
        }
        assert_eq!(
            MaterialPreset::matching(&SoftMaterial::JELLY.with_friction(0.123)),
            None
        );
    }
}
