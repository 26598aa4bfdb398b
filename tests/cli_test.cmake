# Command-line behaviour that needs no GPU: bad input and a missing device give one clear line on
# stderr and a non-zero exit.
function(expect_failure what pattern)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  WORKING_DIRECTORY ${SRC})
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what}: exit 0, expected failure\n${out}${err}")
  endif()
  if(NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: stderr does not match '${pattern}':\n${err}")
  endif()
  message(STATUS "ok: ${what}: ${err}")
endfunction()

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/typo.yaml "benchmarks:\n  - network: resnet50\n    precisions: [fp16]\n    batchs: [1]\n")
expect_failure("unknown flag" "unknown flag '--bogus'" ${BENCH} --bogus)
expect_failure("bad engine list" "--exclude_engines takes cuDNN engine names" ${BENCH} --exclude_engines=cudnn4)
expect_failure("infer bad engine list" "--exclude_engines takes cuDNN engine names" ${INFER} --network=resnet50 --output=x.safetensors --exclude_engines=cudnn4)
expect_failure("bad build threads" "--build_threads takes a whole number" ${BENCH} --build_threads=0)
expect_failure("infer bad build threads" "--build_threads takes a whole number" ${INFER} --network=resnet50 --output=x.safetensors --build_threads=lots)
expect_failure("bad graph edges" "--graph_edges takes captured or full, not 'auto'" ${BENCH} --graph_edges=auto)
expect_failure("config typo" "batchs.*batches" ${BENCH} --config=${CMAKE_CURRENT_BINARY_DIR}/typo.yaml)
expect_failure("missing config" "nope.yaml" ${BENCH} --config=nope.yaml)
expect_failure("missing weights" "missing.safetensors" ${BENCH} --weights=missing.safetensors)
expect_failure("infer unknown network" "unknown network 'resnet51'" ${INFER} --network=resnet51 --output=x.safetensors)

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/badnet.yaml "benchmarks:\n  - network: vgg-17\n    precisions: [fp16]\n    batches: [1]\n")
expect_failure("config unknown network" "vgg-17.*vgg16" ${BENCH} --config=${CMAKE_CURRENT_BINARY_DIR}/badnet.yaml)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/classes.yaml "benchmarks:\n  - network: ResNet-50\n    precisions: [fp16]\n    batches: [1]\n    num_classes: 0\n")
expect_failure("config num_classes 0" "num_classes" ${BENCH} --config=${CMAKE_CURRENT_BINARY_DIR}/classes.yaml)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/train_lr.yaml "benchmarks:\n  - network: resnet50\n    precisions: [fp16]\n    batches: [1]\n    modes: [train]\n    optimizer: sgd\n    lr: 0\n")
expect_failure("config train lr 0" "'lr' is '0', but it must be a number > 0" ${BENCH} --config=${CMAKE_CURRENT_BINARY_DIR}/train_lr.yaml)
expect_failure("infer tiny input" "too small for inception_v3" ${INFER} --network=inception-v3 --input_size=64 --output=x.safetensors)

# --list needs no GPU: every network with its parameter count.
execute_process(COMMAND ${BENCH} --list RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "inception_bn +224 +11295240" OR NOT out MATCHES "efficientnet_b7 +600 +66347960")
  message(FATAL_ERROR "--list: rc ${rc}\n${out}${err}")
endif()
message(STATUS "ok: --list")

execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE has_gpu OUTPUT_QUIET ERROR_QUIET)
if(NOT has_gpu EQUAL 0)
  expect_failure("no device" "no CUDA device: " ${BENCH})
  # The training configs get as far as the device: they parse against the real registry.
  expect_failure("train config, no device" "no CUDA device: " ${BENCH} --config=configs/train.yaml)
  expect_failure("tiny imagenet config, no device" "no CUDA device: " ${BENCH} --config=configs/train_tiny_imagenet.yaml)
endif()
