// REQUIRES: ptxas
// Every shipped spec compiles to PTX that ptxas assembles for sm_80 and sm_90.
// RUN: qopt-opt %specs/adamw8bit_block2048.qopt --emit=ptx --arch=sm_80 -o %t.adamw8bit_block2048.sm_80.ptx && %ptxas -arch=sm_80 %t.adamw8bit_block2048.sm_80.ptx -o %t.adamw8bit_block2048.sm_80.cubin
// RUN: qopt-opt %specs/adamw8bit_block2048.qopt --emit=ptx --arch=sm_90 -o %t.adamw8bit_block2048.sm_90.ptx && %ptxas -arch=sm_90 %t.adamw8bit_block2048.sm_90.ptx -o %t.adamw8bit_block2048.sm_90.cubin
// RUN: qopt-opt %specs/adamw8bit_block256.qopt --emit=ptx --arch=sm_80 -o %t.adamw8bit_block256.sm_80.ptx && %ptxas -arch=sm_80 %t.adamw8bit_block256.sm_80.ptx -o %t.adamw8bit_block256.sm_80.cubin
// RUN: qopt-opt %specs/adamw8bit_block256.qopt --emit=ptx --arch=sm_90 -o %t.adamw8bit_block256.sm_90.ptx && %ptxas -arch=sm_90 %t.adamw8bit_block256.sm_90.ptx -o %t.adamw8bit_block256.sm_90.cubin
// RUN: qopt-opt %specs/flash_adam.qopt --emit=ptx --arch=sm_80 -o %t.flash_adam.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adam.sm_80.ptx -o %t.flash_adam.sm_80.cubin
// RUN: qopt-opt %specs/flash_adam.qopt --emit=ptx --arch=sm_90 -o %t.flash_adam.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adam.sm_90.ptx -o %t.flash_adam.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw.sm_80.ptx -o %t.flash_adamw.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw.sm_90.ptx -o %t.flash_adamw.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw_bf16.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw_bf16.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw_bf16.sm_80.ptx -o %t.flash_adamw_bf16.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw_bf16.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw_bf16.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw_bf16.sm_90.ptx -o %t.flash_adamw_bf16.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw_ecc16.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw_ecc16.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw_ecc16.sm_80.ptx -o %t.flash_adamw_ecc16.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw_ecc16.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw_ecc16.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw_ecc16.sm_90.ptx -o %t.flash_adamw_ecc16.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw_linear.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw_linear.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw_linear.sm_80.ptx -o %t.flash_adamw_linear.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw_linear.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw_linear.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw_linear.sm_90.ptx -o %t.flash_adamw_linear.sm_90.cubin
// RUN: qopt-opt %specs/flash_lion.qopt --emit=ptx --arch=sm_80 -o %t.flash_lion.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_lion.sm_80.ptx -o %t.flash_lion.sm_80.cubin
// RUN: qopt-opt %specs/flash_lion.qopt --emit=ptx --arch=sm_90 -o %t.flash_lion.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_lion.sm_90.ptx -o %t.flash_lion.sm_90.cubin
// RUN: qopt-opt %specs/flash_sgd.qopt --emit=ptx --arch=sm_80 -o %t.flash_sgd.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_sgd.sm_80.ptx -o %t.flash_sgd.sm_80.cubin
// RUN: qopt-opt %specs/flash_sgd.qopt --emit=ptx --arch=sm_90 -o %t.flash_sgd.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_sgd.sm_90.ptx -o %t.flash_sgd.sm_90.cubin
// RUN: qopt-opt %specs/flash_sgdw.qopt --emit=ptx --arch=sm_80 -o %t.flash_sgdw.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_sgdw.sm_80.ptx -o %t.flash_sgdw.sm_80.cubin
// RUN: qopt-opt %specs/flash_sgdw.qopt --emit=ptx --arch=sm_90 -o %t.flash_sgdw.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_sgdw.sm_90.ptx -o %t.flash_sgdw.sm_90.cubin
// RUN: qopt-opt %specs/adamw4bit.qopt --emit=ptx --arch=sm_80 -o %t.adamw4bit.sm_80.ptx && %ptxas -arch=sm_80 %t.adamw4bit.sm_80.ptx -o %t.adamw4bit.sm_80.cubin
// RUN: qopt-opt %specs/adamw4bit.qopt --emit=ptx --arch=sm_90 -o %t.adamw4bit.sm_90.ptx && %ptxas -arch=sm_90 %t.adamw4bit.sm_90.ptx -o %t.adamw4bit.sm_90.cubin
// RUN: qopt-opt %specs/adamw4bit_sr.qopt --emit=ptx --arch=sm_80 -o %t.adamw4bit_sr.sm_80.ptx && %ptxas -arch=sm_80 %t.adamw4bit_sr.sm_80.ptx -o %t.adamw4bit_sr.sm_80.cubin
// RUN: qopt-opt %specs/adamw4bit_sr.qopt --emit=ptx --arch=sm_90 -o %t.adamw4bit_sr.sm_90.ptx && %ptxas -arch=sm_90 %t.adamw4bit_sr.sm_90.ptx -o %t.adamw4bit_sr.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw_sr.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw_sr.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw_sr.sm_80.ptx -o %t.flash_adamw_sr.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw_sr.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw_sr.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw_sr.sm_90.ptx -o %t.flash_adamw_sr.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw4bit.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw4bit.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw4bit.sm_80.ptx -o %t.flash_adamw4bit.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw4bit.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw4bit.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw4bit.sm_90.ptx -o %t.flash_adamw4bit.sm_90.cubin
// RUN: qopt-opt %specs/flash_adamw_kahan.qopt --emit=ptx --arch=sm_80 -o %t.flash_adamw_kahan.sm_80.ptx && %ptxas -arch=sm_80 %t.flash_adamw_kahan.sm_80.ptx -o %t.flash_adamw_kahan.sm_80.cubin
// RUN: qopt-opt %specs/flash_adamw_kahan.qopt --emit=ptx --arch=sm_90 -o %t.flash_adamw_kahan.sm_90.ptx && %ptxas -arch=sm_90 %t.flash_adamw_kahan.sm_90.ptx -o %t.flash_adamw_kahan.sm_90.cubin
// RUN: FileCheck %s --input-file=%t.flash_adamw.sm_90.ptx
// CHECK: .target sm_90
// CHECK: .visible .entry FlashAdamW(
