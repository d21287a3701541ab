//===- ParseScheme.cpp - The DSL's state schemes --------------------------===//
//
// The parser's rules for a state's scheme (docs/dsl.md, "Grammar" and "Schemes"): plain,
// codebook and group schemes with their options. The conventions are
// Parser.cpp's: each rule reports one error and returns false.
//
//===----------------------------------------------------------------------===//

#include "qopt/Frontend/Parser.h"

using namespace mlir::qopt::frontend;

/// scheme ::= 'f32' | 'bf16'
///          | 'codebook' '<' INT (',' overflow-opt)? '>'
///          | 'group' '<' ('i8' | 'u8' | 'i4' | 'u4') ',' INT (',' group-opt)* '>'
bool Parser::parseScheme(StateScheme &scheme) {
  scheme.loc = tok.loc;
  if (tok.isWord("f32") || tok.isWord("bf16")) {
    scheme.kind = SchemeKind::Plain;
    scheme.plainType = tok.isWord("f32") ? FloatType::F32 : FloatType::BF16;
    consume();
    return true;
  }
  if (tok.isWord("codebook")) {
    consume();
    scheme.kind = SchemeKind::Codebook;
    if (!expect(TokenKind::Less, "after 'codebook'") ||
        !parseSize(scheme.blockSize, scheme.sizeLoc, "the block size"))
      return false;
    if (consumeIf(TokenKind::Comma)) {
      if (!tok.isWord("overflow"))
        return errorHere("unknown codebook option " + describeCurrent() +
                         "; expected overflow = saturate|ieee");
      if (!parseOverflowOption(scheme))
        return false;
    }
    return expect(TokenKind::Greater, "at the end of the codebook scheme");
  }
  if (!tok.isWord("group"))
    return errorHere("unknown state scheme " + describeCurrent() +
                     "; expected f32, bf16, codebook<...> or group<...>");
  consume();
  scheme.kind = SchemeKind::Group;
  if (!expect(TokenKind::Less, "after 'group'"))
    return false;
  if (tok.isWord("i8") || tok.isWord("i4"))
    scheme.isSigned = true;
  else if (tok.isWord("u8") || tok.isWord("u4"))
    scheme.isSigned = false;
  else
    return errorHere("expected the code type of the group ('i8', 'u8', 'i4' "
                     "or 'u4'), found " +
                     describeCurrent());
  scheme.bits = tok.isWord("i4") || tok.isWord("u4") ? 4 : 8;
  consume();
  if (!expect(TokenKind::Comma, "after the code type") ||
      !parseSize(scheme.groupSize, scheme.sizeLoc, "the group size"))
    return false;
  unsigned seenOptions = 0;
  while (consumeIf(TokenKind::Comma))
    if (!parseGroupOption(scheme, seenOptions))
      return false;
  return expect(TokenKind::Greater, "at the end of the group scheme");
}

/// group-opt ::= 'softsign' | 'sqrt' | 'linear' | 'dynamic' | 'nonzero'
///             | 'scale' '=' ('f16' | 'f32')
///             | 'round' '=' ('half_up' | 'half_even')
///             | 'divide' '=' ('absmax' | 'stored_scale')
///             | overflow-opt
bool Parser::parseGroupOption(StateScheme &scheme, unsigned &seenOptions) {
  enum : unsigned {
    kCompanding = 1,
    kScale = 2,
    kRound = 4,
    kDivide = 8,
    kOverflow = 16
  };
  Loc optLoc = tok.loc;
  auto markSeen = [&](unsigned bit, llvm::StringRef what) {
    if (seenOptions & bit)
      return errorHere(what + " of the group scheme is given twice");
    seenOptions |= bit;
    return true;
  };

  if (tok.isWord("softsign") || tok.isWord("sqrt") || tok.isWord("linear") ||
      tok.isWord("dynamic") || tok.isWord("nonzero")) {
    if (!markSeen(kCompanding, "the companding"))
      return false;
    scheme.companding = tok.isWord("softsign") ? Companding::Softsign
                        : tok.isWord("sqrt")   ? Companding::Sqrt
                        : tok.isWord("dynamic") ? Companding::Dynamic
                        : tok.isWord("nonzero") ? Companding::NonZero
                                               : Companding::Linear;
    scheme.compandingLoc = optLoc;
    consume();
    return true;
  }

  if (tok.isWord("scale")) {
    if (!markSeen(kScale, "option 'scale'"))
      return false;
    consume();
    if (!expect(TokenKind::Equal, "after 'scale'"))
      return false;
    if (tok.isWord("f16"))
      scheme.scaleType = FloatType::F16;
    else if (tok.isWord("f32"))
      scheme.scaleType = FloatType::F32;
    else
      return errorHere("expected the scale type ('f16' or 'f32'), found " +
                       describeCurrent());
    scheme.scaleLoc = optLoc;
    consume();
    return true;
  }

  if (tok.isWord("round")) {
    if (!markSeen(kRound, "option 'round'"))
      return false;
    scheme.roundingLoc = tok.loc;
    consume();
    if (!expect(TokenKind::Equal, "after 'round'"))
      return false;
    if (tok.isWord("half_up"))
      scheme.rounding = Rounding::HalfUp;
    else if (tok.isWord("half_even"))
      scheme.rounding = Rounding::HalfEven;
    else
      return errorHere("expected a rounding ('half_up' or 'half_even'), "
                       "found " +
                       describeCurrent());
    consume();
    return true;
  }

  if (tok.isWord("divide")) {
    if (!markSeen(kDivide, "option 'divide'"))
      return false;
    consume();
    if (!expect(TokenKind::Equal, "after 'divide'"))
      return false;
    if (tok.isWord("absmax"))
      scheme.divisor = ScaleDivisor::Absmax;
    else if (tok.isWord("stored_scale"))
      scheme.divisor = ScaleDivisor::StoredScale;
    else
      return errorHere("expected a divisor ('absmax' or 'stored_scale'), "
                       "found " +
                       describeCurrent());
    consume();
    return true;
  }

  if (tok.isWord("overflow"))
    return markSeen(kOverflow, "option 'overflow'") &&
           parseOverflowOption(scheme);

  return errorHere("unknown group option " + describeCurrent() +
                   "; expected softsign, sqrt, linear, dynamic, nonzero, "
                   "scale = f16|f32, "
                   "round = half_up|half_even, divide = "
                   "absmax|stored_scale or overflow = saturate|ieee");
}

/// overflow-opt ::= 'overflow' '=' ('saturate' | 'ieee')
bool Parser::parseOverflowOption(StateScheme &scheme) {
  consume(); // 'overflow'
  if (!expect(TokenKind::Equal, "after 'overflow'"))
    return false;
  if (tok.isWord("saturate"))
    scheme.overflow = Overflow::Saturate;
  else if (tok.isWord("ieee"))
    scheme.overflow = Overflow::Ieee;
  else
    return errorHere("expected an overflow policy ('saturate' or 'ieee'), "
                     "found " +
                     describeCurrent());
  consume();
  return true;
}
