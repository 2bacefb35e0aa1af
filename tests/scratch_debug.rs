use std::sync::Arc;
use bevy_deformable::sim::{Obstacle, SoftMaterial, SoftWorld, TetMesh, Vec3, WorldSettings};

#[test]
fn debug_two_cubes() {
    let mut settings = WorldSettings::default();
    if std::env::var("NOLCP").is_ok() { settings.lcp.max_sweeps = 0; settings.lcp.max_cg_iterations = 0; }
    let mut world = SoftWorld::new(settings);
    world.add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap());
    let a = world.add_body(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 4)), SoftMaterial::RUBBER, Vec3::new(0.0, 0.11, 0.0)).unwrap();
    let b = world.add_body(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 4)), SoftMaterial::RUBBER, if std::env::var("ALIGN").is_ok() { Vec3::new(0.0, 0.34, 0.0) } else { Vec3::new(0.013, 0.34, -0.007) }).unwrap();
    if std::env::var("PIN").is_ok() { for v in 0..world.positions(a).unwrap().len() { let p = world.positions(a).unwrap()[v]; world.pin(a, v, p).unwrap(); } }
    for step in 0..60 {
        let r = world.step(1.0/60.0).unwrap();
        let va = world.velocities(a).unwrap().iter().map(|v| v.norm()).fold(0.0, f64::max);
        let vb = world.velocities(b).unwrap().iter().map(|v| v.norm()).fold(0.0, f64::max);
        let lowb = world.positions(b).unwrap().iter().map(|p| p.y).fold(f64::MAX, f64::min);
        let topa = world.positions(a).unwrap().iter().map(|p| p.y).fold(f64::MIN, f64::max);
        println!("{step}: soft {} islands {} largest {} constraints {} active {} kkt {:.2e} mprgp {} pen {:.4} lcp {:?} va {:.3} vb {:.3} gap {:.4} frozen {:?}", r.soft_contacts, r.islands, r.largest_island, r.constraints, r.active_constraints, r.kkt_residual, r.mprgp_iterations, r.max_penetration, (r.lcp.regions, r.lcp.largest_region, r.lcp.cg_iterations, r.lcp.gs_sweeps, r.lcp.residual), va, vb, lowb - topa, r.frozen);
        if !r.frozen.is_empty() { break; }
    }
}

#[test]
fn debug_slide() {
    let mut world = SoftWorld::new(WorldSettings::default());
    world.add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap().with_friction(0.5));
    let a = world.add_body(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)), SoftMaterial::STIFF_FOAM.with_friction(0.5), Vec3::new(0.0, 0.1, 0.0)).unwrap();
    for v in world.velocities_mut(a).unwrap() { *v = Vec3::new(1.0, 0.0, 0.0); }
    for step in 0..30 {
        let r = world.step(1.0/60.0).unwrap();
        let x = world.positions(a).unwrap();
        let c: Vec3 = x.iter().sum::<Vec3>() / x.len() as f64;
        let v: Vec3 = world.velocities(a).unwrap().iter().sum::<Vec3>() / x.len() as f64;
        let pts = world.contact_points();
        let imp: Vec3 = pts.iter().map(|p| p.impulse).sum();
        println!("{step}: c {:.4} {:.4} v {:.4} {:.4} contacts {} impulse {:.4} {:.4} lcp {:?}", c.x, c.y, v.x, v.y, pts.len(), imp.x, imp.y, (r.lcp.regions, r.lcp.cg_iterations, r.lcp.gs_sweeps, r.lcp.residual));
    }
}

#[test]
fn debug_slope() {
    use nalgebra::UnitQuaternion;
    let mu: f64 = std::env::var("MU").ok().and_then(|v| v.parse().ok()).unwrap_or(0.2);
    let deg: f64 = std::env::var("DEG").ok().and_then(|v| v.parse().ok()).unwrap_or(mu.atan().to_degrees() - 1.0);
    let mut settings = WorldSettings::default();
    if std::env::var("NOLCP").is_ok() { settings.lcp.max_sweeps = 0; settings.lcp.max_cg_iterations = 0; }
    if let Some(it) = std::env::var("ITS").ok().and_then(|v| v.parse().ok()) { settings.pd_iterations = it; }
    let mut world = SoftWorld::new(settings);
    let rotation = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), deg.to_radians());
    let normal = rotation * Vec3::y();
    let body = world.add_body_with_pose(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)), SoftMaterial::STIFF_FOAM.with_friction(mu).with_damping(std::env::var("DAMP").ok().and_then(|v| v.parse().ok()).unwrap_or(5.0)).with_youngs_modulus(std::env::var("E").ok().and_then(|v| v.parse().ok()).unwrap_or(1e6)).with_density(std::env::var("RHO").ok().and_then(|v| v.parse().ok()).unwrap_or(200.0)), normal * 0.1, rotation).unwrap();
    world.add_obstacle(Obstacle::halfspace(normal).unwrap().with_friction(mu));
    let c0: Vec3 = world.positions(body).unwrap().iter().sum::<Vec3>() / 27.0;
    let down = rotation * -Vec3::x();
    for step in 0..150 {
        world.step(1.0/60.0).unwrap();
        let c: Vec3 = world.positions(body).unwrap().iter().sum::<Vec3>() / 27.0;
        let pts = world.contact_points();
        let imp: Vec3 = pts.iter().map(|p| p.impulse).sum();
        let m: f64 = 0.2f64.powi(3) * 200.0;
        let v: Vec3 = world.velocities(body).unwrap().iter().sum::<Vec3>() / 27.0;
        if step % 10 == 0 || step < 5 { println!("{step}: slid {:.5} normal {:.5} v {:.5} contacts {} friction/needed {:.4} normal/needed {:.4}", (c - c0).dot(&down), (c - c0).dot(&normal), v.dot(&down), pts.len(), -imp.dot(&down) / (m * 9.81 * deg.to_radians().sin() / 60.0), imp.dot(&normal) / (m * 9.81 * deg.to_radians().cos() / 60.0)); }
    }
}

#[test]
fn debug_bounce() {
    let e: f64 = std::env::var("REST").ok().and_then(|v| v.parse().ok()).unwrap_or(0.8);
    let mut world = SoftWorld::new(WorldSettings::default());
    let body = world.add_body(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 2)), SoftMaterial::RUBBER.with_restitution(e), Vec3::new(0.0, 0.6, 0.0)).unwrap();
    world.add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap().with_restitution(e));
    for step in 0..60 {
        let r = world.step(1.0/60.0).unwrap();
        let c: Vec3 = world.positions(body).unwrap().iter().sum::<Vec3>() / 27.0;
        let v: Vec3 = world.velocities(body).unwrap().iter().sum::<Vec3>() / 27.0;
        let low = world.positions(body).unwrap().iter().map(|p| p.y).fold(f64::MAX, f64::min);
        println!("{step}: y {:.4} vy {:.4} low {:.5} active {} ke {:.4}", c.y, v.y, low, r.active_constraints, world.kinetic_energy(body).unwrap());
    }
}

#[test]
fn debug_stack() {
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let mut settings = WorldSettings::default();
    if std::env::var("NOLCP").is_ok() { settings.lcp.max_sweeps = 0; settings.lcp.max_cg_iterations = 0; }
    let mut world = SoftWorld::new(settings);
    world.add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap());
    let mu: f64 = std::env::var("MU").ok().and_then(|v| v.parse().ok()).unwrap_or(0.8);
    let bodies: Vec<_> = (0..n).map(|i| world.add_body(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 4)), SoftMaterial::RUBBER.with_friction(mu), Vec3::new(0.013 * i as f64, 0.11 + 0.23 * i as f64, -0.007 * i as f64)).unwrap()).collect();
    for step in 0..240 {
        let r = world.step(1.0/60.0).unwrap();
        if step % 10 == 0 {
            let cs: Vec<String> = bodies.iter().map(|&b| { let x = world.positions(b).unwrap(); let c: Vec3 = x.iter().sum::<Vec3>() / x.len() as f64; format!("({:.3},{:.3},{:.3})", c.x, c.y, c.z) }).collect();
            let soft: Vec<_> = world.contact_points().iter().filter(|p| p.soft).collect();
            let imp: Vec3 = soft.iter().map(|p| p.impulse).sum();
            let tilted = soft.iter().filter(|p| p.normal.y.abs() < 0.99).count();
            let tilted_imp: Vec3 = soft.iter().filter(|p| p.normal.y.abs() < 0.99).map(|p| p.impulse).sum();
            println!("{step}: {} soft {} imp ({:.4},{:.4},{:.4}) tilted {} timp ({:.4},{:.4},{:.4})", cs.join(" "), soft.len(), imp.x, imp.y, imp.z, tilted, tilted_imp.x, tilted_imp.y, tilted_imp.z);
        }
    }
}

#[test]
fn debug_soft_friction() {
    let mu: f64 = std::env::var("MU").ok().and_then(|v| v.parse().ok()).unwrap_or(0.8);
    let mut world = SoftWorld::new(WorldSettings::default());
    world.add_obstacle(Obstacle::halfspace(Vec3::y()).unwrap().with_friction(mu));
    let a = world.add_body(Arc::new(TetMesh::cuboid(Vec3::new(0.4, 0.1, 0.4), 8)), SoftMaterial::RUBBER.with_friction(mu), Vec3::new(0.0, 0.1, 0.0)).unwrap();
    let b = world.add_body(Arc::new(TetMesh::cuboid(Vec3::repeat(0.1), 4)), SoftMaterial::RUBBER.with_friction(mu), Vec3::new(0.0, 0.3005, 0.0)).unwrap();
    for _ in 0..20 { world.step(1.0/60.0).unwrap(); }
    for v in world.velocities_mut(b).unwrap() { v.x += 0.5; }
    let c = |w: &SoftWorld, h| { let x = w.positions(h).unwrap(); x.iter().sum::<Vec3>() / x.len() as f64 };
    let c0 = c(&world, b);
    for step in 0..40 {
        world.step(1.0/60.0).unwrap();
        let vb: Vec3 = world.velocities(b).unwrap().iter().sum::<Vec3>() / 125.0;
        let fr: Vec3 = world.contact_points().iter().filter(|p| p.soft).map(|p| p.impulse).sum();
        if step % 4 == 0 { println!("{step}: b moved {:.4} vx {:.4} a {:.4} soft impulse {:.4} {:.4} n {}", c(&world, b).x - c0.x, vb.x, c(&world, a).x, fr.x, fr.y, world.contact_points().iter().filter(|p| p.soft).count()); }
    }
}
