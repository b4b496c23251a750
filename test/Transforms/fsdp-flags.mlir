// fsdp-opt's FSDP flags must make sense together; nothing is written
// otherwise.
// RUN: not fsdp-opt %s --world-size 2 2>&1 | FileCheck %s --check-prefix=NOLOSS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --sharding ZERO3 2>&1 | FileCheck %s --check-prefix=SHARDING
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 0 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 4294967298 2>&1 | FileCheck %s --check-prefix=WORLDMAX
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 99999999999 2>&1 | FileCheck %s --check-prefix=WORLDMAX2
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 8 --sharding HYBRID_SHARD --shard-group-size 4294967298 2>&1 | FileCheck %s --check-prefix=GROUPMAX
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 4 --sharding HYBRID_SHARD 2>&1 | FileCheck %s --check-prefix=HYBRID
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 4 --sharding HYBRID_SHARD --shard-group-size 3 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 4 --shard-group-size 2 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap transformer 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap class --wrap-class Block --min-num-params 10 2>&1 | FileCheck %s --check-prefix=MINPARAMS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap size --wrap-class Block 2>&1 | FileCheck %s --check-prefix=WRAPCLASS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap class 2>&1 | FileCheck %s --check-prefix=NOCLASS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap class --wrap-class Block --wrap-module a 2>&1 | FileCheck %s --check-prefix=WRAPMODULE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap modules -o %t.out 2>&1 | FileCheck %s --check-prefix=NOMODULE
// RUN: not test -e %t.out
// RUN: not fsdp-opt %s --loss none --optimizer sgd --backward-prefetch BACKWARD 2>&1 | FileCheck %s --check-prefix=PREFETCH
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 4 --sharding HYBRID_SHARD --shard-group-size 2 --hybrid-reduction tree 2>&1 | FileCheck %s --check-prefix=HYBRIDREDUCTION
// RUN: not fsdp-opt %s --loss none --optimizer sgd --world-size 4 --hybrid-reduction two-stage 2>&1 | FileCheck %s --check-prefix=HYBRIDONLY
// RUN: not fsdp-opt %s --loss none --optimizer sgd --limit-all-gathers -1 2>&1 | FileCheck %s --check-prefix=LIMIT
// RUN: not fsdp-opt %s --loss none --optimizer sgd --limit-reductions -1 2>&1 | FileCheck %s --check-prefix=REDUCTIONS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap budget 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap size --memory-budget 1GiB 2>&1 | FileCheck %s --check-prefix=BUDGETPOLICY
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap size --memory-budget 1GiB --savers none 2>&1 | FileCheck %s --check-prefix=BUDGETNONE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --memory-budget 1GiB --ac-class Block 2>&1 | FileCheck %s --check-prefix=SAVERSAC
// RUN: not fsdp-opt %s --loss none --optimizer sgd --savers auto 2>&1 | FileCheck %s --check-prefix=SAVERSNOBUDGET
// RUN: not fsdp-opt %s --loss none --optimizer sgd --savers some --memory-budget 1GiB 2>&1 | FileCheck %s --check-prefix=SAVERSVALUE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --savers auto --offload auto --memory-budget 1GiB 2>&1 | FileCheck %s --check-prefix=SAVERSONE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --offload auto 2>&1 | FileCheck %s --check-prefix=OFFLOADNOBUDGET
// RUN: not fsdp-opt %s --loss none --optimizer sgd --offload auto --auto-wrap budget --memory-budget 1MiB 2>&1 | FileCheck %s --check-prefix=TWOBUDGETS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --offload some 2>&1 | FileCheck %s --check-prefix=OFFLOADVALUE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --offload-params --offload none 2>&1 | FileCheck %s --check-prefix=OFFLOADDISAGREE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --offload auto --memory-budget 1MiB --offload-unit a 2>&1 | FileCheck %s --check-prefix=OFFLOADUNITS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --sharding OSS --world-size 2 --offload-optim-unit a 2>&1 | FileCheck %s --check-prefix=OFFLOADOSS
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap budget --memory-budget 12parsecs 2>&1 | FileCheck %s --check-prefix=BUDGETSIZE
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap budget --memory-budget 0 2>&1 | FileCheck %s --check-prefix=BUDGETZERO
// A fraction of a byte is a mistyped size (it was taken as 1 byte).
// RUN: not fsdp-opt %s --loss none --optimizer sgd --auto-wrap budget --memory-budget 1.5 2>&1 | FileCheck %s --check-prefix=BUDGETFRACTION
// HYBRIDREDUCTION: error: --hybrid-reduction tree: expected ordered or two-stage
// HYBRIDONLY: error: --hybrid-reduction applies to HYBRID_SHARD, not FULL_SHARD
// PREFETCH: error: --backward-prefetch BACKWARD: expected BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH
// LIMIT: error: --limit-all-gathers must not be negative (0: no limit), found -1
// REDUCTIONS: error: --limit-reductions must not be negative (0: no bound), found -1
// NOLOSS: error: FSDP options need --loss: what is sharded is the training step
// SHARDING: error: --sharding ZERO3: expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, OSS or SHARDED_DDP
// WORLD: error: --world-size must be at least 1, found 0
// WORLDMAX: error: --world-size must be at most 2147483647 (ranks are C ints), found 4294967298
// WORLDMAX2: error: --world-size must be at most 2147483647 (ranks are C ints), found 99999999999
// GROUPMAX: error: --shard-group-size must be at most 2147483647, found 4294967298
// HYBRID: error: HYBRID_SHARD needs --shard-group-size G (or a config file's num_machines): the ranks of one node, which shard each unit; groups of G ranks replicate it
// DIVIDE: error: --shard-group-size 3 does not divide --world-size 4
// GROUP: error: --shard-group-size applies to HYBRID_SHARD, not FULL_SHARD
// POLICY: error: --auto-wrap transformer: expected size, class, modules, budget or none
// NOBUDGET: error: --auto-wrap budget needs --memory-budget SIZE (the most bytes a rank may hold during a step)
// BUDGETPOLICY: error: --auto-wrap: --memory-budget chooses it (--savers auto); drop it, or give --savers none with --auto-wrap budget or --offload auto to choose one saver alone
// BUDGETNONE: error: --memory-budget with --savers none applies to --auto-wrap budget or --offload auto, not --auto-wrap size
// SAVERSAC: error: --ac-class: --memory-budget chooses it (--savers auto)
// SAVERSNOBUDGET: error: --savers auto needs --memory-budget SIZE (the most bytes a rank may hold during a step)
// SAVERSVALUE: error: --savers some: expected auto or none
// SAVERSONE: error: --savers auto chooses every saver; --offload auto chooses one alone: use one
// OFFLOADNOBUDGET: error: --offload auto needs --memory-budget SIZE (the most bytes a rank may hold during a step)
// TWOBUDGETS: error: --auto-wrap budget and --offload auto both choose under --memory-budget: use one
// OFFLOADVALUE: error: --offload some: expected none, params or auto
// OFFLOADDISAGREE: error: --offload-params and --offload none disagree
// OFFLOADUNITS: error: --offload-unit and --offload-optim-unit choose units themselves: not with --offload-params or --offload auto
// OFFLOADOSS: error: CPU offload applies to FSDP's strategies, not OSS (its parameters are whole on every rank)
// BUDGETSIZE: error: --memory-budget 12parsecs: expected a positive whole number of bytes, or a size with B, KiB, MiB, GiB, TiB, KB, MB, GB or TB
// BUDGETZERO: error: --memory-budget 0: expected a positive whole number of bytes
// BUDGETFRACTION: error: --memory-budget 1.5: expected a positive whole number of bytes
// MINPARAMS: error: --min-num-params applies to --auto-wrap size, not class
// WRAPCLASS: error: --wrap-class applies to --auto-wrap class, not size
// NOCLASS: error: --auto-wrap class needs --wrap-class NAME
// WRAPMODULE: error: --wrap-module applies to --auto-wrap modules, not class
// NOMODULE: error: --auto-wrap modules needs --wrap-module PATH
module {
  fsdp.param @w : tensor<3xf32> in "" : "M"
}
