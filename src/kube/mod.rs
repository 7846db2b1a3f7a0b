//! Kubernetes' command vocabulary, once: which kubeconfig a command uses ([`kubeconfig`]) and
//! the kubectl command line built on it ([`kubectl`]). Pure: text only.

pub mod kubeconfig;
pub mod kubectl;
