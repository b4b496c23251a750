// fsdp-prefetch decides which gathers start earlier and marks them
// (fsdp.prefetch); fsdp-apply-schedule moves them (apply-schedule.mlir).
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch | FileCheck %s --check-prefix=PRE
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=backward-prefetch=BACKWARD_POST | FileCheck %s --check-prefix=POST
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch="backward-prefetch=NO_PREFETCH forward-prefetch=true" | FileCheck %s --check-prefix=FWD
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=backward-prefetch=NO_PREFETCH | FileCheck %s --check-prefix=NONE

// BACKWARD_PRE (the default) marks the backward's gathers after the first;
// the forward keeps its place.
// PRE-LABEL: func.func @train_step
// PRE:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// PRE:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard {fsdp.prefetch = "wait"}

// BACKWARD_POST: b's gather comes after c's free (only neg between): it is
// marked, to start right after the free.
// POST:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// POST:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// POST:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "free"}
// POST:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :

// FWD:       fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :
// FWD:       fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// FWD:       fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard {fsdp.prefetch = "wait"}
// FWD:       fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// FWD:       fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard :
// FWD:       fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :

// NONE-NOT: fsdp.prefetch
