//! `Reflect` for the two core enums the Bevy layer uses as they are ([`CombineRule`],
//! [`FrictionModel`]): the core does not depend on Bevy, so their reflection is implemented
//! here, from the Bevy side, and the inspector and scenes see them like any Bevy type.

use bevy::prelude::ReflectDefault;
use bevy::reflect::impl_reflect;

use crate::sim::CombineRule;
use crate::sim::contact::FrictionModel;

impl_reflect!(
    #[reflect(Clone, Debug, Hash, PartialEq, Default)]
    #[type_path = "bevy_deformable::sim"]
    enum CombineRule {
        Average,
        Min,
        Multiply,
        Max,
    }
);

impl_reflect!(
    #[reflect(Clone, Debug, PartialEq, Default)]
    #[type_path = "bevy_deformable::sim::contact"]
    enum FrictionModel {
        Cone,
        Pyramid,
    }
);
