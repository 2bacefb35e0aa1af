//! What every example shares: the window, an orbit camera, lights, a tiled floor that is also an
//! obstacle, the inspector panel (with the scene's tuning saved to `assets/tuning/<name>.ron`
//! and its simulation state to `saves/<name>.bin`), pause and single-step keys, and the
//! headless screenshot mode CI uses.
//!
//! Controls: drag a body to pull it, drag elsewhere to orbit, scroll to zoom, shift-click a
//! body to pin a vertex, `P` pauses, `S` advances one fixed step while paused, `F1` hides the
//! panel.
//!
//! Environment:
//! - `DEFORMABLE_FRAMES=N`: run N frames, then exit.
//! - `DEFORMABLE_SCREENSHOT=out.png`: save a screenshot after N frames (default 300), then exit.
//! - `DEFORMABLE_PANEL=closed`: start with the inspector panel hidden (to measure its cost).
//! - `DEFORMABLE_DEBUG_DRAW=all` (or a comma list of `tets,surface,proxies,contacts,active,
//!   pins,bvh`): start with those debug overlays on.
//!
//! In either mode every frame advances the simulation clock by exactly 1/60 s, so a screenshot
//! shows the same moment of the scene however slow the machine renders.

use std::time::Duration;

use bevy::app::AppExit;
use bevy::asset::RenderAssetUsages;
use bevy::image::{ImageAddressMode, ImageSampler, ImageSamplerDescriptor};
use bevy::input::mouse::{AccumulatedMouseMotion, AccumulatedMouseScroll};
use bevy::light::CascadeShadowConfigBuilder;
use bevy::math::Affine2;
use bevy::prelude::*;
use bevy::render::render_resource::{Extent3d, TextureDimension, TextureFormat};
use bevy::render::view::screenshot::{Screenshot, save_to_disk};
use bevy::time::TimeUpdateStrategy;
use bevy_deformable::prelude::*;

/// `DefaultPlugins` with a titled 1280x720 window, the soft-body plugin and [`ExampleScene`].
#[allow(dead_code)] // Used by every example but `rollback`, which gives its own plugin.
pub fn example_app(title: &str, scene: ExampleScene) -> App {
    example_app_with(title, scene, DeformablePlugin::default())
}

/// [`example_app`] with the soft-body plugin given (say, stepping in a schedule of its own).
pub fn example_app_with(title: &str, scene: ExampleScene, plugin: DeformablePlugin) -> App {
    let mut app = App::new();
    app.add_plugins((
        DefaultPlugins
            .set(AssetPlugin {
                // Approved loads only, but a model given on the command line may be approved
                // explicitly (the character example).
                unapproved_path_mode: bevy::asset::UnapprovedPathMode::Deny,
                ..default()
            })
            .set(WindowPlugin {
                primary_window: Some(Window {
                    title: format!(
                        "bevy_deformable: {title} (drag a body: pull, drag: orbit, scroll: zoom, \
                     P: pause, S: step, F1: panel)"
                    ),
                    resolution: (1280, 720).into(),
                    ..default()
                }),
                ..default()
            }),
        plugin,
        DeformableInspectorPlugin {
            open: std::env::var("DEFORMABLE_PANEL").as_deref() != Ok("closed"),
            ..default()
        }
        .with_tuning_file(format!("assets/tuning/{title}.ron"))
        .with_state_file(format!("saves/{title}.bin")),
        scene,
    ));
    app
}

/// Camera, light, floor, controls and the headless mode.
#[derive(Clone, Copy)]
pub struct ExampleScene {
    /// The point the camera orbits (m).
    pub focus: Vec3,
    /// Distance of the camera from the focus (m).
    pub distance: f32,
    /// Initial camera yaw (radians, about +Y).
    pub yaw: f32,
    /// Initial camera pitch (radians, above the horizon).
    pub pitch: f32,
}

impl Default for ExampleScene {
    fn default() -> Self {
        Self {
            focus: Vec3::new(0.0, 0.5, 0.0),
            distance: 6.0,
            yaw: 0.5,
            pitch: 0.35,
        }
    }
}

/// An orbit camera: drag with the left mouse button to turn, scroll to zoom.
#[derive(Component)]
struct OrbitCamera {
    focus: Vec3,
    yaw: f32,
    pitch: f32,
    distance: f32,
}

/// The headless run: how many frames, and where the screenshot goes.
#[derive(Resource)]
struct Headless {
    frames: u32,
    screenshot: Option<String>,
    frame: u32,
    requested: bool,
    /// For the closing report: when frame 10 ended, and the sum of step times (ms) since.
    started: Option<std::time::Instant>,
    step_ms: f64,
}

impl Plugin for ExampleScene {
    fn build(&self, app: &mut App) {
        let frames = std::env::var("DEFORMABLE_FRAMES")
            .ok()
            .and_then(|v| v.parse().ok());
        let screenshot = std::env::var("DEFORMABLE_SCREENSHOT").ok();
        if frames.is_some() || screenshot.is_some() {
            app.insert_resource(Headless {
                frames: frames.unwrap_or(300),
                screenshot,
                frame: 0,
                requested: false,
                started: None,
                step_ms: 0.0,
            })
            .insert_resource(TimeUpdateStrategy::ManualDuration(Duration::from_secs_f64(
                1.0 / 60.0,
            )))
            .add_systems(Update, run_headless);
        }
        if let Ok(list) = std::env::var("DEFORMABLE_DEBUG_DRAW") {
            app.add_systems(Startup, move |mut inspector: ResMut<InspectorState>| {
                let on = |name: &str| list == "all" || list.split(',').any(|s| s.trim() == name);
                let d = &mut inspector.draw;
                d.tets = on("tets");
                d.surface = on("surface");
                d.proxies = on("proxies");
                d.contacts = on("contacts");
                d.active_constraints = on("active");
                d.pins = on("pins");
                d.bvh = on("bvh");
            });
        }
        let scene = *self;
        app.insert_resource(ClearColor(SKY))
            // Sky-coloured ambient light, so no side is black.
            .insert_resource(GlobalAmbientLight {
                color: Color::srgb(0.8, 0.88, 1.0),
                brightness: 500.0,
                ..default()
            })
            .add_systems(
                Startup,
                move |commands: Commands,
                      meshes: ResMut<Assets<Mesh>>,
                      materials: ResMut<Assets<StandardMaterial>>,
                      images: ResMut<Assets<Image>>| {
                    spawn_stage(scene, commands, meshes, materials, images)
                },
            )
            .add_systems(Update, (orbit_camera, pause_and_step));
    }
}

fn spawn_stage(
    scene: ExampleScene,
    mut commands: Commands,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    commands.spawn((
        Camera3d::default(),
        orbit_transform(scene.focus, scene.yaw, scene.pitch, scene.distance),
        // The far floor fades into the sky instead of ending at a hard horizon.
        DistanceFog {
            color: SKY,
            falloff: FogFalloff::Linear {
                start: 15.0,
                end: 40.0,
            },
            ..default()
        },
        OrbitCamera {
            focus: scene.focus,
            yaw: scene.yaw,
            pitch: scene.pitch,
            distance: scene.distance,
        },
    ));
    // Key light: a warm sun from the right, low enough for shadows to show, fitted to 20 m.
    commands.spawn((
        DirectionalLight {
            illuminance: 10_000.0,
            color: Color::srgb(1.0, 0.96, 0.9),
            shadow_maps_enabled: true,
            ..default()
        },
        CascadeShadowConfigBuilder {
            first_cascade_far_bound: 6.0,
            maximum_distance: 20.0,
            ..default()
        }
        .build(),
        Transform::from_xyz(5.0, 7.0, 1.5).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    // Fill light: a dim, cool light from the other side, without shadows, so the sides
    // the sun misses are not black.
    commands.spawn((
        DirectionalLight {
            illuminance: 1_800.0,
            color: Color::srgb(0.75, 0.85, 1.0),
            shadow_maps_enabled: false,
            ..default()
        },
        Transform::from_xyz(-5.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    // The floor: a plane you see, and the half-space obstacle it is. Its 0.5 m tiles give a
    // sense of scale and read as a surface under the shadows.
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(FLOOR_SIZE, FLOOR_SIZE))),
        MeshMaterial3d(materials.add(StandardMaterial {
            base_color_texture: Some(images.add(floor_tiles())),
            uv_transform: Affine2::from_scale(Vec2::splat(FLOOR_SIZE)),
            perceptual_roughness: 0.85,
            reflectance: 0.3,
            ..default()
        })),
        Obstacle::halfspace(Vec3::Y),
    ));
}

/// Side of the square floor (m).
const FLOOR_SIZE: f32 = 30.0;
/// Sky colour: the clear colour, and the colour the fog fades the far floor into.
const SKY: Color = Color::srgb(0.62, 0.75, 0.88);

/// A 1 m square of floor as a texture: four 0.5 m tiles in two warm greys, with thin grout
/// lines, repeating.
fn floor_tiles() -> Image {
    const N: usize = 64;
    let mut data = Vec::with_capacity(N * N * 4);
    for y in 0..N {
        for x in 0..N {
            let grout = x % (N / 2) == 0 || y % (N / 2) == 0;
            let dark = (x < N / 2) != (y < N / 2);
            let v: [u8; 3] = if grout {
                [78, 76, 72]
            } else if dark {
                [104, 101, 96]
            } else {
                [122, 119, 113]
            };
            data.extend_from_slice(&[v[0], v[1], v[2], 255]);
        }
    }
    let mut image = Image::new(
        Extent3d {
            width: N as u32,
            height: N as u32,
            depth_or_array_layers: 1,
        },
        TextureDimension::D2,
        data,
        TextureFormat::Rgba8UnormSrgb,
        RenderAssetUsages::RENDER_WORLD,
    );
    image.sampler = ImageSampler::Descriptor(ImageSamplerDescriptor {
        address_mode_u: ImageAddressMode::Repeat,
        address_mode_v: ImageAddressMode::Repeat,
        ..ImageSamplerDescriptor::linear()
    });
    image
}

/// The vertices within 1 mm of the top face of a box body with `half_extents` (m), to pin or
/// attach it by its top.
#[allow(dead_code)] // Used by the examples that hang bodies, not by every example.
pub fn top_face(half_extents: Vec3) -> VertexSelection {
    let margin = Vec3::splat(1e-3);
    VertexSelection::in_box(
        Vec3::new(-half_extents.x, half_extents.y, -half_extents.z) - margin,
        half_extents + margin,
    )
}

/// A PBR material for a soft body of this colour.
#[allow(dead_code)] // Used by most examples; the showcase uses the looks below.
pub fn soft_look(color: Color) -> StandardMaterial {
    StandardMaterial {
        base_color: color,
        perceptual_roughness: 0.35,
        reflectance: 0.4,
        ..default()
    }
}

/// Jelly: translucent and glossy, with a wet clear coat and a faint glow of its own colour, so
/// it reads as gelatine (`alpha` 0.8: the floor shows through).
#[allow(dead_code)] // Used by the examples with jelly bodies, not by every example.
pub fn jelly_look(color: Color) -> StandardMaterial {
    StandardMaterial {
        base_color: color.with_alpha(0.8),
        emissive: LinearRgba::from(color) * 0.25,
        perceptual_roughness: 0.12,
        reflectance: 0.6,
        clearcoat: 1.0,
        clearcoat_perceptual_roughness: 0.05,
        alpha_mode: AlphaMode::Blend,
        ..default()
    }
}

/// Rubber (and foam): opaque, matte and saturated, with a broad dull highlight.
#[allow(dead_code)] // Used by the examples with rubber bodies, not by every example.
pub fn rubber_look(color: Color) -> StandardMaterial {
    StandardMaterial {
        base_color: color,
        perceptual_roughness: 0.8,
        reflectance: 0.25,
        ..default()
    }
}

/// Flesh: warm, with light scattered through it (diffuse transmission) and a soft, broad
/// sheen from a rough clear coat.
#[allow(dead_code)] // Used by the examples with flesh bodies, not by every example.
pub fn flesh_look(color: Color) -> StandardMaterial {
    StandardMaterial {
        base_color: color,
        emissive: LinearRgba::from(color) * 0.06,
        perceptual_roughness: 0.55,
        reflectance: 0.35,
        diffuse_transmission: 0.3,
        clearcoat: 0.4,
        clearcoat_perceptual_roughness: 0.45,
        ..default()
    }
}

fn orbit_transform(focus: Vec3, yaw: f32, pitch: f32, distance: f32) -> Transform {
    let offset = Quat::from_euler(EulerRot::YXZ, yaw, -pitch, 0.0) * Vec3::new(0.0, 0.0, distance);
    Transform::from_translation(focus + offset).looking_at(focus, Vec3::Y)
}

fn orbit_camera(
    buttons: Res<ButtonInput<MouseButton>>,
    motion: Res<AccumulatedMouseMotion>,
    scroll: Res<AccumulatedMouseScroll>,
    inspector: Res<InspectorState>,
    mut cameras: Query<(&mut OrbitCamera, &mut Transform)>,
) {
    // The mouse is on the panel or holds a body.
    if inspector.pointer_busy {
        return;
    }
    for (mut orbit, mut transform) in &mut cameras {
        if buttons.pressed(MouseButton::Left) {
            orbit.yaw -= motion.delta.x * 0.005;
            orbit.pitch = (orbit.pitch + motion.delta.y * 0.005).clamp(-0.2, 1.45);
        }
        orbit.distance = (orbit.distance * (1.0 - scroll.delta.y * 0.1)).clamp(1.0, 50.0);
        *transform = orbit_transform(orbit.focus, orbit.yaw, orbit.pitch, orbit.distance);
    }
}

/// `P` pauses and resumes; `S` advances one fixed step while paused.
fn pause_and_step(keys: Res<ButtonInput<KeyCode>>, mut config: ResMut<DeformableConfig>) {
    if keys.just_pressed(KeyCode::KeyP) {
        config.paused = !config.paused;
    }
    if config.paused && keys.just_pressed(KeyCode::KeyS) {
        config.single_step = true;
    }
}

/// Counts frames; then requests the screenshot (if any), waits for the file, and exits.
fn run_headless(
    mut commands: Commands,
    mut headless: ResMut<Headless>,
    mut exit: MessageWriter<AppExit>,
    stats: Res<DeformableDiagnostics>,
    inspector: Res<InspectorState>,
    bodies: Query<&DeformableState>,
) {
    headless.frame += 1;
    // The first frames include start-up (pipeline compilation): measure from frame 10 on.
    // (Wall time from `Instant`: in this mode `Time<Real>` advances by the fixed 1/60 s too.)
    if headless.frame == 10 {
        headless.started = Some(std::time::Instant::now());
    } else if headless.frame > 10 && headless.frame <= headless.frames {
        headless.step_ms += stats.step_ms + stats.cloth_ms;
    }
    if headless.frame < headless.frames {
        return;
    }
    if headless.frame == headless.frames {
        let measured = headless.frames.saturating_sub(10).max(1) as f64;
        let vertices: usize = bodies.iter().map(|b| b.vertex_count()).sum();
        info!(
            "headless run: {:.1} frames/s, simulation {:.2} ms per fixed step (bodies and \
             cloth; mean of frames 11..{}), {} bodies, {vertices} simulated vertices, \
             inspector panel {:.3} ms per frame (CPU, smoothed)",
            measured
                / headless
                    .started
                    .map_or(f64::INFINITY, |t| t.elapsed().as_secs_f64()),
            headless.step_ms / measured,
            headless.frames,
            bodies.iter().count(),
            inspector.panel_ms,
        );
    }
    let Some(path) = headless.screenshot.clone() else {
        exit.write(AppExit::Success);
        return;
    };
    if !headless.requested {
        headless.requested = true;
        let _ = std::fs::remove_file(&path);
        commands
            .spawn(Screenshot::primary_window())
            .observe(save_to_disk(path));
    } else if std::path::Path::new(&path).exists() {
        exit.write(AppExit::Success);
    } else if headless.frame > headless.frames + 600 {
        error!("the screenshot {path} was never written");
        exit.write(AppExit::error());
    }
}
