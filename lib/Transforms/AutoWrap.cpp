//===- AutoWrap.cpp - group parameters into FSDP units ---------------------===//
//
// PyTorch FSDP wraps modules at run time, as its auto_wrap_policy decides
// while it recurses over the module tree. Here the same decision is made on
// the module tree the importer recorded (`fsdp.modules`), and its result is
// an attribute on every parameter: the unit that shards it.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace fsdp {
#define GEN_PASS_DEF_AUTOWRAP
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

struct Module {
  std::string path, cls;
  int parent = -1;
  SmallVector<int> children;
  int64_t ownNumel = 0; // parameters this module registers itself
};


struct AutoWrap : fsdp::impl::AutoWrapBase<AutoWrap> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run(getOperation())))
      signalPassFailure();
  }

  LogicalResult run(ModuleOp module);
  LogicalResult readTree(ModuleOp module);
  int64_t wrapBySize(int index, llvm::StringSet<> &units);

  std::vector<Module> tree;
  llvm::StringMap<int> byPath;
};

LogicalResult AutoWrap::readTree(ModuleOp module) {
  auto modules = module->getAttrOfType<ArrayAttr>(kModulesAttr);
  if (!modules)
    return module.emitError("has no module tree (fsdp.modules): auto-wrap "
                            "needs a module imported from TorchScript");
  for (Attribute entry : modules) {
    auto pair = dyn_cast<ArrayAttr>(entry);
    if (!pair || pair.size() != 2 || !isa<StringAttr>(pair[0]) ||
        !isa<StringAttr>(pair[1]))
      return module.emitError("fsdp.modules entries must be [path, class] "
                              "string pairs, found ")
             << entry;
    Module m;
    m.path = cast<StringAttr>(pair[0]).str();
    m.cls = cast<StringAttr>(pair[1]).str();
    byPath[m.path] = tree.size();
    tree.push_back(std::move(m));
  }
  if (tree.empty() || !tree.front().path.empty())
    return module.emitError("fsdp.modules must start with the root module "
                            "(path \"\")");
  // Preorder: a module's parent is the nearest earlier prefix.
  for (int i = 1, e = tree.size(); i < e; ++i) {
    StringRef path = tree[i].path;
    int parent = 0;
    for (StringRef prefix = path; !prefix.empty();) {
      prefix = prefix.rsplit('.').first == prefix ? StringRef()
                                                   : prefix.rsplit('.').first;
      auto it = byPath.find(prefix);
      if (it != byPath.end()) {
        parent = it->second;
        break;
      }
    }
    tree[i].parent = parent;
    tree[parent].children.push_back(i);
  }
  return success();
}

/// FSDP1's size_based_auto_wrap_policy, nested: returns the parameter count
/// under `index` not yet in a unit, after wrapping the children that reach
/// the threshold.
int64_t AutoWrap::wrapBySize(int index, llvm::StringSet<> &units) {
  Module &m = tree[index];
  int64_t unwrapped = m.ownNumel;
  for (int child : m.children)
    unwrapped += wrapBySize(child, units);
  bool container = moduleClassMatches(m.cls, "ModuleList") ||
                   moduleClassMatches(m.cls, "ModuleDict");
  if (index != 0 && !container && unwrapped >= minNumParams &&
      unwrapped > 0) {
    units.insert(m.path);
    return 0;
  }
  return unwrapped;
}

LogicalResult AutoWrap::run(ModuleOp module) {
  if (failed(readTree(module)))
    return failure();
  std::optional<AutoWrapPolicy> kind = symbolizeAutoWrapPolicy(policy);
  if (!kind)
    return module.emitError("unknown auto-wrap policy '")
           << policy << "': expected size, class, modules or none";
  if (minNumParams < 0)
    return module.emitError("min-num-params must not be negative, found ")
           << int64_t(minNumParams);
  auto requireEmpty = [&](const ListOption<std::string> &list,
                          StringRef name, StringRef wants) -> LogicalResult {
    if (!list.empty() && policy != wants)
      return module.emitError(name) << " applies to the " << wants
                                    << " policy, not " << policy;
    return success();
  };
  if (failed(requireEmpty(wrapClasses, "wrap-class", "class")) ||
      failed(requireEmpty(wrapModules, "wrap-module", "modules")))
    return failure();
  if (kind == AutoWrapPolicy::Class && wrapClasses.empty())
    return module.emitError("the class policy needs at least one wrap-class");
  if (kind == AutoWrapPolicy::Modules && wrapModules.empty())
    return module.emitError(
        "the modules policy needs at least one wrap-module");

  auto checkPaths = [&](const ListOption<std::string> &paths,
                        StringRef flag) -> LogicalResult {
    for (const std::string &path : paths)
      if (!byPath.count(path))
        return module.emitError(flag)
               << " '" << path << "' is not a module of the model";
    return success();
  };
  if (failed(checkPaths(wrapModules, "wrap-module")) ||
      failed(checkPaths(ignoreModules, "ignore-module")))
    return failure();

  auto ignored = [&](StringRef owner) {
    return llvm::any_of(ignoreModules, [&](const std::string &path) {
      return isWithinModule(owner, path);
    });
  };
  // As FSDP, ignored parameters do not count towards a unit's size.
  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  for (ParamOp p : params) {
    auto it = byPath.find(p.getModulePath());
    if (it == byPath.end())
      return p.emitOpError("belongs to module '")
             << p.getModulePath() << "', which is not in fsdp.modules";
    if (!ignored(p.getModulePath()))
      tree[it->second].ownNumel +=
          cast<ShapedType>(p.getType()).getNumElements();
  }

  llvm::StringSet<> units;
  units.insert("");
  if (kind == AutoWrapPolicy::Size) {
    wrapBySize(0, units);
  } else if (kind == AutoWrapPolicy::Class) {
    for (const std::string &name : wrapClasses) {
      bool found = false;
      for (const Module &m : tree)
        if (moduleClassMatches(m.cls, name)) {
          units.insert(m.path);
          found = true;
        }
      if (!found) {
        llvm::StringSet<> classes;
        std::string known;
        for (const Module &m : tree)
          if (classes.insert(m.cls).second)
            known += (known.empty() ? "" : ", ") + m.cls;
        return module.emitError("wrap-class '")
               << name << "' is the class of no module; the model's classes "
               << "are: " << known;
      }
    }
  } else if (kind == AutoWrapPolicy::Modules) {
    for (const std::string &path : wrapModules)
      units.insert(path);
  }

  Builder b(module.getContext());
  for (ParamOp p : params) {
    StringRef owner = p.getModulePath();
    if (ignored(owner)) {
      p->setAttr(kIgnoredAttr, b.getUnitAttr());
      p->removeAttr(kUnitAttr);
      continue;
    }
    // The innermost unit around the owner.
    int index = byPath.lookup(owner);
    while (index != 0 && !units.contains(tree[index].path))
      index = tree[index].parent;
    p->setAttr(kUnitAttr, b.getStringAttr(tree[index].path));
    p->removeAttr(kIgnoredAttr);
  }
  return success();
}

} // namespace
