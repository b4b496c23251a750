// Each option error of fsdp-auto-wrap.
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=transformer 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not fsdp-opt %s --fsdp-auto-wrap="policy=size min-num-params=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not fsdp-opt %s --fsdp-auto-wrap="policy=size wrap-class=Block" 2>&1 | FileCheck %s --check-prefix=CLASS-POLICY
// RUN: not fsdp-opt %s --fsdp-auto-wrap="policy=class wrap-module=a" 2>&1 | FileCheck %s --check-prefix=MODULE-POLICY
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=class 2>&1 | FileCheck %s --check-prefix=NO-CLASS
// RUN: not fsdp-opt %s --fsdp-auto-wrap=policy=modules 2>&1 | FileCheck %s --check-prefix=NO-MODULE
// RUN: not fsdp-opt %s --fsdp-auto-wrap="policy=class wrap-class=GPT2Block" 2>&1 | FileCheck %s --check-prefix=UNKNOWN-CLASS
// RUN: not fsdp-opt %s --fsdp-auto-wrap="policy=modules wrap-module=b" 2>&1 | FileCheck %s --check-prefix=UNKNOWN-MODULE
// RUN: not fsdp-opt %s --fsdp-auto-wrap="ignore-module=a.x" 2>&1 | FileCheck %s --check-prefix=UNKNOWN-IGNORED
// POLICY: error: unknown auto-wrap policy 'transformer': expected size, class, modules or none
// NEGATIVE: error: min-num-params must not be negative, found -1
// CLASS-POLICY: error: wrap-class applies to the class policy, not size
// MODULE-POLICY: error: wrap-module applies to the modules policy, not class
// NO-CLASS: error: the class policy needs at least one wrap-class
// NO-MODULE: error: the modules policy needs at least one wrap-module
// UNKNOWN-CLASS: error: wrap-class 'GPT2Block' is the class of no module; the model's classes are: models.Net, torch.nn.modules.linear.Linear
// UNKNOWN-MODULE: error: wrap-module 'b' is not a module of the model
// UNKNOWN-IGNORED: error: ignore-module 'a.x' is not a module of the model
module attributes {fsdp.modules = [["", "models.Net"], ["a", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @a.weight : tensor<4x3xf32> in "a" : "torch.nn.modules.linear.Linear"
}
