// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=size min-num-params=100" | FileCheck %s --check-prefix=SIZE
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=size min-num-params=300" | FileCheck %s --check-prefix=SIZE300
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=size min-num-params=136" | FileCheck %s --check-prefix=EXACT
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=size min-num-params=137" | FileCheck %s --check-prefix=ABOVE
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=size min-num-params=200" | FileCheck %s --check-prefix=LIST
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=class wrap-class=Block" | FileCheck %s --check-prefix=CLASS
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=class wrap-class=models.Block,torch.nn.modules.linear.Linear" | FileCheck %s --check-prefix=NESTED
// RUN: fsdp-opt %s --fsdp-auto-wrap="policy=modules wrap-module=blocks.1,head ignore-module=blocks.0.fc2" | FileCheck %s --check-prefix=MODULES
// RUN: fsdp-opt %s --fsdp-auto-wrap | FileCheck %s --check-prefix=NONE

// Two blocks of two linear layers (136 and 72 parameters each), in a
// ModuleList, an embedding on the root and a head tied to it.
module attributes {fsdp.modules = [["", "models.Net"], ["blocks", "torch.nn.modules.container.ModuleList"], ["blocks.0", "models.Block"], ["blocks.0.fc1", "torch.nn.modules.linear.Linear"], ["blocks.0.fc2", "torch.nn.modules.linear.Linear"], ["blocks.1", "models.Block"], ["blocks.1.fc1", "torch.nn.modules.linear.Linear"], ["blocks.1.fc2", "torch.nn.modules.linear.Linear"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @emb : tensor<10x8xf32> in "" : "models.Net" aliases ["head.weight"]
  fsdp.param @blocks.0.fc1.weight : tensor<8x8xf32> in "blocks.0.fc1" : "torch.nn.modules.linear.Linear"
  fsdp.param @blocks.0.fc1.bias : tensor<8xf32> in "blocks.0.fc1" : "torch.nn.modules.linear.Linear"
  fsdp.param @blocks.0.fc2.weight : tensor<8x8xf32> in "blocks.0.fc2" : "torch.nn.modules.linear.Linear"
  fsdp.param @blocks.1.fc1.weight : tensor<8x8xf32> in "blocks.1.fc1" : "torch.nn.modules.linear.Linear"
  fsdp.param @blocks.1.fc2.bias : tensor<8xf32> in "blocks.1.fc2" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.bias : tensor<10xf32> in "head" : "torch.nn.modules.linear.Linear"
}

// Size, nested as FSDP1: bottom-up, a module whose unwrapped parameters
// reach 100 becomes a unit: blocks.0 (136), blocks.1 (72) does not, nor
// does the ModuleList (never a unit, as in FSDP); the root takes the rest.
// SIZE: fsdp.param @emb {{.*}} {fsdp.unit = ""}
// SIZE: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = "blocks.0"}
// SIZE: fsdp.param @blocks.0.fc1.bias {{.*}} {fsdp.unit = "blocks.0"}
// SIZE: fsdp.param @blocks.0.fc2.weight {{.*}} {fsdp.unit = "blocks.0"}
// SIZE: fsdp.param @blocks.1.fc1.weight {{.*}} {fsdp.unit = ""}
// SIZE: fsdp.param @blocks.1.fc2.bias {{.*}} {fsdp.unit = ""}
// SIZE: fsdp.param @head.bias {{.*}} {fsdp.unit = ""}

// The boundary is FSDP's `>=`: blocks.0's 136 unwrapped parameters make a
// unit at min_num_params 136, not at 137.
// EXACT: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = "blocks.0"}
// EXACT: fsdp.param @blocks.1.fc1.weight {{.*}} {fsdp.unit = ""}
// ABOVE: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = ""}
// ABOVE-NOT: fsdp.unit = "blocks

// The ModuleList holds 208 >= 200 unwrapped parameters but is never a unit
// (neither block reaches 200): the root takes them.
// LIST-NOT: fsdp.unit = "blocks
// LIST: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = ""}
// LIST-NOT: fsdp.unit = "blocks

// No module but the root reaches 300: one unit.
// SIZE300-NOT: fsdp.unit = "{{[a-z]}}

// Class: every module of the class; its last name component is enough.
// CLASS: fsdp.param @emb {{.*}} {fsdp.unit = ""}
// CLASS: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = "blocks.0"}
// CLASS: fsdp.param @blocks.0.fc2.weight {{.*}} {fsdp.unit = "blocks.0"}
// CLASS: fsdp.param @blocks.1.fc1.weight {{.*}} {fsdp.unit = "blocks.1"}
// CLASS: fsdp.param @blocks.1.fc2.bias {{.*}} {fsdp.unit = "blocks.1"}
// CLASS: fsdp.param @head.bias {{.*}} {fsdp.unit = ""}

// Units nest: a parameter belongs to the innermost.
// NESTED: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = "blocks.0.fc1"}
// NESTED: fsdp.param @head.bias {{.*}} {fsdp.unit = "head"}

// Modules by path; an ignored module's parameters are marked, in no unit.
// MODULES: fsdp.param @blocks.0.fc1.weight {{.*}} {fsdp.unit = ""}
// MODULES: fsdp.param @blocks.0.fc2.weight {{.*}} {fsdp.ignored}
// MODULES: fsdp.param @blocks.1.fc1.weight {{.*}} {fsdp.unit = "blocks.1"}
// MODULES: fsdp.param @head.bias {{.*}} {fsdp.unit = "head"}

// No policy: the root is the only unit.
// NONE-COUNT-7: {fsdp.unit = ""}
