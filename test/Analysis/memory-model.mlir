// The memory model on a small step: what each kind of op adds to the bytes
// a rank holds, instruction by instruction, as fsdp-run counts them.
// RUN: fsdp-opt %s --fsdp-memory-report=json=true -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: fsdp-opt %s --fsdp-memory-report -o /dev/null | FileCheck %s --check-prefix=TEXT

// The keys come in alphabetical order. Before the step: the shard of @a
// (4 floats, 16 bytes) and the batch %x (32). The peak holds the shard, the
// batch, the gathered buffer and the contiguous copy of its transpose.
// JSON: "breakdown":{"activations":32,"communication buffers":0,"gathered parameters":32,"gradients":0,"inputs":32,"state":16,"temporaries":0}
// The most bytes during each instruction: #9 and #12 hold a copy beside what
// it copies, #14 its result beside both operands, #16 the reduced shard
// beside the reduction's buffers.
// JSON-SAME: "instruction_peak":[48,80,80,80,80,112,112,112,80,112,80,80,112,80,112,68,84,32]
// JSON-SAME: "peak_bytes":112
// JSON-SAME: "peak_instruction":5
// JSON-SAME: "peak_op":"aten::contiguous"
// JSON-SAME: "start_bytes":48
// The timeline, after each instruction:
//   #0 get: the state's own storage (48); #1 all-gather: its 32-byte output
//   buffer (80); #2 wait returns that buffer; #3 fsdp.view and #4 aten::t
//   share it; #5 contiguous of the transposed view copies it (112);
//   #6 reshape of a contiguous value is a view; #7 free (80); #8 t of the
//   batch is a view; #9 reshape of it cannot view (a copy, 112) and the
//   batch dies with its last view (80); #10 relu_ writes its dying argument
//   in place; #11 view; #12 relu_ of a view copies (112 while both live,
//   then the viewed storage dies: 80); #13 reshape of the contiguous copy
//   is a view; #14 add (112) then both operands die (48); #15
//   reduce-scatter holds its input, a buffer for the other rank's chunk
//   (its own is added from the input) and the mean's 4-byte divisor (68);
//   #16 wait: the 16-byte reduced shard (84), the buffers go (32); #17
//   update: the new shard replaces the old (16).
// JSON-SAME: "timeline":[48,80,80,80,80,112,112,80,80,80,80,80,80,80,48,68,32,16]
// JSON-SAME: "units":[{"first_instruction":1,"last_instruction":7,"micro_batch":0,"module":"a","peak_bytes":112,"phase":"forward","unit":"a"}]
// JSON-SAME: "world_size":2

// TEXT: memory: one rank of 2, one step (bytes of live tensor storages, as fsdp-run counts them)
// TEXT-NEXT: peak 112 B (112 bytes) during instruction #5 (aten::contiguous, forward)
// TEXT-NEXT:   state                 16 B
// TEXT-NEXT:   inputs                32 B
// TEXT-NEXT:   gathered parameters   32 B
// TEXT-NEXT:   activations           32 B
// TEXT-NEXT:   gradients             0 B
// TEXT-NEXT:   communication buffers 0 B
// TEXT-NEXT:   temporaries           0 B
// TEXT-NEXT: before the step (state and batch): 48 B
// TEXT-NEXT: peak while a unit's parameters are gathered:
// TEXT-NEXT:   a forward 112 B (instructions #1-#7)

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<2x4xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32
  func.func @train_step(%x: tensor<2x4xf32>) {
    %s = fsdp.get @a : tensor<4xf32>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xf32> -> !fsdp.future<tensor<8xf32>>
    %b = fsdp.wait %f : !fsdp.future<tensor<8xf32>>
    %w = fsdp.view %b[0] : tensor<8xf32> to tensor<2x4xf32>
    %t = aten.call "aten::t"(%w) : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %c = aten.call "aten::contiguous"(%t, 0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %r = aten.call "aten::reshape"(%c, [8]) : (tensor<4x2xf32>) -> tensor<8xf32>
    fsdp.free %b : tensor<8xf32>
    %xt = aten.call "aten::t"(%x) : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %y = aten.call "aten::reshape"(%xt, [8]) : (tensor<4x2xf32>) -> tensor<8xf32>
    %z:2 = aten.call "aten::relu_"(%y) {mutates = array<i64: 0>} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    %v = aten.call "aten::view"(%z#1, [2, 4]) : (tensor<8xf32>) -> tensor<2x4xf32>
    %u:2 = aten.call "aten::relu_"(%v) {mutates = array<i64: 0>} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
    %ur = aten.call "aten::reshape"(%u#1, [8]) : (tensor<2x4xf32>) -> tensor<8xf32>
    %sum = aten.call "aten::add.Tensor"(%r, %ur, 1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %g = fsdp.reduce_scatter.start %sum for @a group shard reduce mean : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
    %gs = fsdp.wait %g : !fsdp.future<tensor<4xf32>>
    fsdp.update @a, %gs : tensor<4xf32>
    return
  }
}
