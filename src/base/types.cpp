#include "base/types.hpp"

namespace coll {

size_t typeSize(collDataType_t dt) {
  switch (dt) {
    case collInt8: case collUint8: return 1;
    case collFloat16: case collBfloat16: case collInt16: case collUint16: return 2;
    case collInt32: case collUint32: case collFloat32: return 4;
    case collInt64: case collUint64: case collFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(collDataType_t dt) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64",
                                "uint64", "half", "float", "double", "bfloat16",
                                "int16", "uint16"};
  return validType(dt) ? names[dt] : "invalid";
}

const char* opName(collRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor",
                                "sumrepro", "avgrepro"};
  return validOp(op) ? names[op] : "invalid";
}

bool isBitwiseOp(collRedOp_t op) { return op == collBand || op == collBor || op == collBxor; }

bool isFloatType(collDataType_t dt) {
  return dt == collFloat16 || dt == collBfloat16 || dt == collFloat32 || dt == collFloat64;
}

}  // namespace coll
