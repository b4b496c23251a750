// A forward whose one call, aten::put (accumulate=False), has no
// deterministic kernel: e2e/run_deterministic.test.
module {
  func.func @forward(%x: tensor<5xf32> {fsdp.name = "x"}) -> tensor<5xf32> {
    %i = aten.constant dense<[0, 0]> : tensor<2xi64>
    %s = aten.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %y = aten.call "aten::put"(%x, %i, %s, false) : (tensor<5xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<5xf32>
    return %y : tensor<5xf32>
  }
}
