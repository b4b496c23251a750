// The cost model on a small step: the predicted time of each instruction
// from a machine file's rates, and the step's time with collectives that
// overlap the computation (collective_overlap 1) and that do not (0), and
// with ranks that fall apart as they compute (collective_skew).
// RUN: rm -rf %t && mkdir -p %t
// RUN: echo '{"fsdp_machine_version": 1, "machine": "test", "ranks": 2, "matmul_flops_per_s": 100, "matmul_half_flops_per_s": 1000, "conv_flops_per_s": 100, "memory_bytes_per_s": 1000, "host_memory_bytes_per_s": 1000, "op_overhead_s": 0.001, "collective_bytes_per_s": 1000, "collective_latency_s": 0.01, "copy_bytes_per_s": 1000, "collective_overlap": 1}' > %t/overlap.json
// RUN: sed 's/"collective_overlap": 1/"collective_overlap": 0/' %t/overlap.json > %t/serial.json
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=machine=%t/overlap.json -o /dev/null | FileCheck %s --check-prefix=OVERLAP
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=machine=%t/serial.json -o /dev/null | FileCheck %s --check-prefix=SERIAL
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/overlap.json" -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: sed 's/"collective_overlap": 1/"collective_overlap": 1, "collective_skew": 0.5/' %t/overlap.json > %t/skew.json
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=machine=%t/skew.json -o /dev/null | FileCheck %s --check-prefix=SKEW
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/skew.json" -o /dev/null | FileCheck %s --check-prefix=SKEWJSON
// RUN: sed 's/"collective_overlap": 1/"collective_overlap": 0, "collective_skew": 0.5/' %t/overlap.json > %t/serialskew.json
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=machine=%t/serialskew.json -o /dev/null | FileCheck %s --check-prefix=SERIALSKEW
// Kernels timed here (as --measure-kernels times them, given as options):
// warm, and with their operands evicted from the caches.
// RUN: sed 's/"collective_overlap": 1/"collective_overlap": 1, "cache_bytes": 2500/' %t/overlap.json > %t/cache.json
// RUN: sed 's/"collective_overlap": 1/"collective_overlap": 1, "cache_bytes": 1000000/' %t/overlap.json > %t/bigcache.json
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/cache.json kernel-seconds=0.001,0.01,0.01,0.01,0.02 cold-kernel-seconds=0.5,0.05,0.05,0.05,0.06" -o /dev/null | FileCheck %s --check-prefix=COLD
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="machine=%t/cache.json kernel-seconds=0.001,0.01,0.01,0.01,0.02 cold-kernel-seconds=0.5,0.05,0.05,0.05,0.06" -o /dev/null | FileCheck %s --check-prefix=COLDTEXT
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/bigcache.json kernel-seconds=0.001,0.01,0.01,0.01,0.02 cold-kernel-seconds=0.5,0.05,0.05,0.05,0.06" -o /dev/null | FileCheck %s --check-prefix=BIGCACHE
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/cache.json kernel-seconds=0.001,0.01,0.01,0.01,0.02" -o /dev/null | FileCheck %s --check-prefix=WARM
// A machine file without cache_bytes takes 2 MiB.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/overlap.json kernel-seconds=0.001,0.01,0.01,0.01,0.02 cold-kernel-seconds=0.5,0.05,0.05,0.05,0.06" -o /dev/null | FileCheck %s --check-prefix=BIGCACHE
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report="json=true machine=%t/cache.json kernel-seconds=0.01,-1,0.01,-1,0.02 cold-kernel-seconds=0.05,-1,0.05,-1,0.06" -o /dev/null | FileCheck %s --check-prefix=INPLACE

// Instruction by instruction, overlapped: #1 the all-gather moves half of
// its 32-byte output (16 B at 1000 B/s) after its 10 ms latency: 26 ms on
// its own clock; #2 the wait blocks the computation until then (26 ms not
// overlapped); #4 a view costs the overhead (1 ms); #5 mm of 2x4 by 4x2 is
// 32 flops at 100/s (320 ms) against 80 bytes at 1000 B/s (80 ms): 321 ms;
// #6 add of two 8-float tensors moves 96 bytes: 97 ms; #8 the
// reduce-scatter's 26 ms run beside #9 relu's 33 ms (32 bytes), so #10's
// wait does not block: 26 + 1 + 321 + 97 + 33 = 478 ms.
// OVERLAP: step time: 478.00 ms predicted on test ({{.*}}overlap.json, 2 ranks sharing it): computation 452.00 ms, collectives 52.00 ms of which 26.00 ms not overlapped; 0.000 GFLOP
// Serial: each collective blocks the computation for its whole time.
// SERIAL: step time: 504.00 ms predicted on test ({{.*}}serial.json, 2 ranks sharing it): computation 452.00 ms, collectives 52.00 ms of which 52.00 ms not overlapped; 0.000 GFLOP
// With a skew of 0.5, a collective starts half the computation since the
// ranks last waited together later: #1 after none (0 ms), and #2's wait
// holds the ranks together; #8 after #4-#6's 1 + 321 + 97 = 419 ms, so
// 209.5 ms later: at 445 + 209.5, done at 680.5 ms, which #10 waits for
// (202.5 ms beside #2's 26 not overlapped).
// SKEW: step time: 680.50 ms predicted on test ({{.*}}skew.json, 2 ranks sharing it): computation 452.00 ms, collectives 52.00 ms starting 209.50 ms later for the slowest rank; 228.50 ms not overlapped or waiting for it; 0.000 GFLOP
// SKEWJSON: "lag_seconds":0.2095{{[0-9]*}}
// SKEWJSON-SAME: "step_seconds":0.6805{{[0-9]*}}
// (Times print with a double's every digit: 0.026000000000000002.)
// JSON: "collective_seconds":0.052{{[0-9]*}}
// JSON-SAME: "flops":32
// JSON-SAME: "instruction_seconds":[0,0.026{{[0-9]*}},0,0,0.001,0.321{{[0-9]*}},0.097{{[0-9]*}},0,0.026{{[0-9]*}},0.033{{[0-9]*}},0,0]
// JSON-SAME: "machine":"test"
// JSON-SAME: "step_seconds":0.478{{[0-9]*}}

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<2x4xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32
  func.func @train_step(%x: tensor<2x4xf32>) {
    %s = fsdp.get @a : tensor<4xf32>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xf32> -> !fsdp.future<tensor<8xf32>>
    %b = fsdp.wait %f : !fsdp.future<tensor<8xf32>>
    %w = fsdp.view %b[0] : tensor<8xf32> to tensor<2x4xf32>
    %wt = aten.call "aten::t"(%w) : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %m = aten.call "aten::mm"(%x, %wt) : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
    %sum = aten.call "aten::add.Tensor"(%b, %b, 1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    fsdp.free %b : tensor<8xf32>
    %g = fsdp.reduce_scatter.start %sum for @a group shard reduce mean : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
    %r = aten.call "aten::relu"(%m) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    %gs = fsdp.wait %g : !fsdp.future<tensor<4xf32>>
    fsdp.update @a, %gs : tensor<4xf32>
    return
  }
}

// -----

// Arithmetic: a convolution's output elements (1x3x2x2) each sum
// weight.numel / out_channels = 18 products: 432 flops (4.32 s) against
// 392 bytes (0.39 s), plus the overhead; a bfloat16 product of 8x8 by 8x8
// counts 1024 flops at the half rate (1.024 s against 384 bytes); a world
// of one rank has no collective time.
// OVERLAP: step time: 5.35 s predicted on test
// OVERLAP-SAME: computation 5.35 s, collectives 0 us of which 0 us not overlapped; 0.000 GFLOP
// SKEW: step time: 5.35 s predicted on test
// SKEW-SAME: computation 5.35 s, collectives 0 us of which 0 us not overlapped; 0.000 GFLOP
// SKEWJSON: "lag_seconds":0,
// JSON: "flops":1456
// JSON-SAME: "instruction_seconds":[4.321{{[0-9]*}},1.02{{[0-9]*}}]

module attributes {fsdp.world_size = 1 : i64, fsdp.shard_group_size = 1 : i64} {
  func.func @train_step(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>, %a: tensor<8x8xbf16>) {
    %y = aten.call "aten::conv2d"(%x, %w, none, [1, 1], [0, 0], [1, 1], 1) : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x2x2xf32>
    %p = aten.call "aten::mm"(%a, %a) : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
    return
  }
}

// -----

// A step that returns a loss ends, as fsdp-run times it, with the ranks'
// losses all-reduced in double precision: 10 ms of latency and half of 8
// bytes moved twice (8 B at 1000 B/s), 18 ms the computation waits for.
// The sum reads 32 bytes and writes 4: 1 + 36 = 37 ms; 55 ms in all.
// OVERLAP: step time: 55.00 ms predicted on test
// OVERLAP-SAME: computation 37.00 ms, collectives 18.00 ms of which 18.00 ms not overlapped
// JSON: "instruction_seconds":[{{0.03(7|69)[0-9]*}}]
// JSON-SAME: "loss_seconds":0.018{{[0-9]*}}
// JSON-SAME: "measured_calls":0
// With a skew of 0.5 the all-reduce starts 18.5 ms late, after the 37 ms
// the ranks computed apart: 37 + 18.5 + 18 = 73.5 ms.
// SKEW: step time: 73.50 ms predicted on test
// SKEW-SAME: computation 37.00 ms, collectives 18.00 ms starting 18.50 ms later for the slowest rank; 36.50 ms not overlapped or waiting for it
// SKEWJSON: "lag_seconds":{{0.0185[0-9]*|0.01849[0-9]*}}

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  func.func @train_step(%x: tensor<8xf32>) -> tensor<f32> {
    %l = aten.call "aten::sum"(%x, none) : (tensor<8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A collective the computation is held for until it is done holds the
// ranks together, as a wait does: with overlap 0 and a skew of 0.5, #0's
// 65 ms (64 bytes) start #2's all-gather 32.5 ms late (at 97.5, done at
// 123.5; the computation held 26 ms, to 91); #3's reduce-scatter, queued
// behind it, starts when it ends (123.5, no later: 91 + 32.5) and holds
// the computation to its end (149.5): together again. #6's add (97 ms)
// alone then delays #8's all-gather: 48.5 ms (not 81, had #0's 65 ms
// still counted), done at 321.
// SERIALSKEW: step time: 321.00 ms predicted on test ({{.*}}serialskew.json, 2 ranks sharing it): computation 162.00 ms, collectives 78.00 ms starting 81.00 ms later for the slowest rank; 159.00 ms not overlapped or waiting for it; 0.000 GFLOP

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<8xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32
  func.func @train_step(%x: tensor<8xf32>) {
    %r = aten.call "aten::relu"(%x) : (tensor<8xf32>) -> tensor<8xf32>
    %s = fsdp.get @a : tensor<4xf32>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xf32> -> !fsdp.future<tensor<8xf32>>
    %g = fsdp.reduce_scatter.start %r for @a group shard reduce mean : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
    %b = fsdp.wait %f : !fsdp.future<tensor<8xf32>>
    %gs = fsdp.wait %g : !fsdp.future<tensor<4xf32>>
    %sum = aten.call "aten::add.Tensor"(%b, %r, 1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    fsdp.free %b : tensor<8xf32>
    %h = fsdp.all_gather.start %s for @a group shard : tensor<4xf32> -> !fsdp.future<tensor<8xf32>>
    %c = fsdp.wait %h : !fsdp.future<tensor<8xf32>>
    return
  }
}

// -----

// In a group of one rank a collective moves nothing: the runtime copies
// its input into its result when it starts, a kernel of the computation's
// (the overhead and 16 bytes read and written: 33 ms), and the wait finds
// it done.
// OVERLAP: step time: 33.00 ms predicted on test
// OVERLAP-SAME: computation 33.00 ms, collectives 0 us of which 0 us not overlapped
// JSON: "instruction_seconds":[0,0.033{{[0-9]*}},0]

module attributes {fsdp.world_size = 1 : i64, fsdp.shard_group_size = 1 : i64} {
  fsdp.param @w : tensor<4xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 1 : f32
  func.func @train_step() {
    %s = fsdp.get @a : tensor<4xf32>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
    %b = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    return
  }
}

// -----

// Timed kernels, warm or cold by how long ago their operands were touched
// (cache_bytes 2500): #0 a view costs its warm time (it reads nothing);
// #1 reads the step's input %x (through the view), which nothing touched
// yet: its cold time, 50 ms; #2 and #3 read what the call before wrote:
// warm, 10 ms each; #4 reads %x, last touched 4096 bytes before (#2 and
// #3 read and write 1 KiB each), beyond the cache, and #3's result, warm:
// half of its operands' bytes cold, 20 + 0.5 x 40 = 40 ms. 111 ms, 60 of
// them reading operands no longer in the caches.
// COLD: "cold_seconds":{{0.06[0-9]*|0.059[0-9]*}}
// COLD-SAME: "instruction_seconds":[0.001{{[0-9]*}},{{0.05[0-9]*|0.049[0-9]*}},0.01{{[0-9]*}},0.01{{[0-9]*}},{{0.04[0-9]*|0.039[0-9]*}}]
// COLD-SAME: "measured_calls":5
// COLD-SAME: "step_seconds":0.111{{[0-9]*}}
// COLDTEXT: step time: 111.00 ms predicted on test
// COLDTEXT-SAME: 5 calls timed here (60.00 ms of their time reading operands no longer in the caches)
// With a cache of 1 MB, #4's operands are all warm: 91 ms.
// BIGCACHE: "cold_seconds":{{0.04[0-9]*|0.039[0-9]*}}
// BIGCACHE-SAME: "step_seconds":{{0.091[0-9]*|0.0909[0-9]*}}
// Without cold times, every call its warm one: 51 ms.
// WARM: "cold_seconds":0,{{.*}}"instruction_seconds":[0.001,0.01,0.01,0.01,0.02]
// WARM-SAME: "step_seconds":{{0.051[0-9]*|0.0509[0-9]*}}

module attributes {fsdp.world_size = 1 : i64, fsdp.shard_group_size = 1 : i64} {
  func.func @train_step(%x: tensor<256xf32>) {
    %v = aten.call "aten::alias"(%x) : (tensor<256xf32>) -> tensor<256xf32>
    %a = aten.call "aten::relu"(%v) : (tensor<256xf32>) -> tensor<256xf32>
    %b = aten.call "aten::relu"(%a) : (tensor<256xf32>) -> tensor<256xf32>
    %c = aten.call "aten::relu"(%b) : (tensor<256xf32>) -> tensor<256xf32>
    %d = aten.call "aten::add.Tensor"(%x, %c, 1) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
    return
  }
}

// -----

// What a call writes in place is its operand's storage, touched once, and
// a state read again is the storage read before: #0 reads %x (cold, 50
// ms) and writes 1 KiB; #2 reads the state @a (cold, 50 ms) and writes it
// in place, 1 KiB more (not its two results' 2 KiB besides); #4 reads
// %x, 1 KiB after #0 touched it, and @a's second read, which #2 just
// wrote: warm, 20 ms. 120 ms, 80 of them cold.
// INPLACE: "cold_seconds":{{0.08[0-9]*|0.079[0-9]*}}
// INPLACE-SAME: "instruction_seconds":[{{0.05[0-9]*|0.049[0-9]*}},0,{{0.05[0-9]*|0.049[0-9]*}},0,0.02{{[0-9]*}}]
// INPLACE-SAME: "step_seconds":{{0.12[0-9]*|0.119[0-9]*}}

module attributes {fsdp.world_size = 1 : i64, fsdp.shard_group_size = 1 : i64} {
  fsdp.param @w : tensor<256xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 256 padded 256 shards 1 : f32
  func.func @train_step(%x: tensor<256xf32>) {
    %b = aten.call "aten::relu"(%x) : (tensor<256xf32>) -> tensor<256xf32>
    %s = fsdp.get @a : tensor<256xf32>
    %r:2 = aten.call "aten::relu_"(%s) {mutates = array<i64: 0>} : (tensor<256xf32>) -> (tensor<256xf32>, tensor<256xf32>)
    %s2 = fsdp.get @a : tensor<256xf32>
    %y = aten.call "aten::add.Tensor"(%x, %s2, 1) : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
    return
  }
}
