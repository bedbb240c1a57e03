"""NNI's PBT example trial, shared by the PBT tests."""

NNI_PBT_TRIAL = """
    import json, os
    import nni
    params = nni.get_next_parameter()
    load_path = os.path.join(params["load_checkpoint_dir"], "model.json")
    save_path = os.path.join(params["save_checkpoint_dir"], "model.json")
    model = {"score": 0.0, "writer": None}
    if os.path.isfile(load_path):
        with open(load_path) as file:
            model = json.load(file)
    print("loaded", json.dumps(model))
    model = {"score": model["score"] + params["lr"], "writer": nni.get_trial_id()}
    if not os.path.exists(params["save_checkpoint_dir"]):
        os.makedirs(params["save_checkpoint_dir"])
    with open(save_path, "w") as file:
        json.dump(model, file)
    nni.report_final_result(model["score"])
"""
