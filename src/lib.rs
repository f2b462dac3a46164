//! faultline: takes Kubernetes nodes down on purpose and proves, with timestamps,
//! that the cluster reacted the way its owners believe it does.
