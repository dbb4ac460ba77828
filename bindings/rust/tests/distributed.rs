//! Groups of ranks on CPU threads and their collectives against sums computed here, the group of
//! one rank, and a rank that aborts the group while another waits.
use std::thread;
use std::time::Duration;

use kiln::distributed::Group;
use kiln::llm::Device;
use kiln::Array;

fn values(r: usize) -> Vec<f32> {
    (0..6).map(|i| (r + 1) as f32 + i as f32 / 8.0).collect()
}

#[test]
fn collectives_on_threads_against_sums() {
    let groups = Group::local(&[Device::Cpu, Device::Cpu, Device::Cpu]).unwrap();
    thread::scope(|s| {
        for (r, g) in groups.iter().enumerate() {
            s.spawn(move || {
                assert_eq!((g.rank().unwrap(), g.size().unwrap()), (r as i32, 3));
                let x = Array::from_slice(&values(r), &[6]).unwrap();
                let sum = x.all_sum(Some(g)).unwrap().to_vec::<f32>().unwrap();
                let gathered = x.all_gather(Some(g), 0).unwrap().to_vec::<f32>().unwrap();
                let part = x.reduce_scatter(Some(g)).unwrap().to_vec::<f32>().unwrap();
                for i in 0..6 {
                    assert_eq!(sum[i], values(0)[i] + values(1)[i] + values(2)[i]);
                    assert_eq!(gathered[r * 6 + i], values(r)[i]);
                }
                assert_eq!(part, sum[2 * r..2 * r + 2].to_vec());
            });
        }
    });
    let one = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!(one.all_sum(None).unwrap().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn abort_ends_the_wait_of_the_other_rank() {
    let groups = Group::local(&[Device::Cpu, Device::Cpu]).unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let x = Array::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
            x.all_sum(Some(&groups[0])).unwrap().to_vec::<f32>().unwrap_err()
        });
        thread::sleep(Duration::from_millis(200)); // rank 0 is waiting by now
        groups[1].abort("rank 1 failed").unwrap();
        assert_eq!(
            waiter.join().unwrap().message(),
            "[all_sum] the group was aborted: rank 1 failed"
        );
    });
    let err = Group::local(&[Device::Cuda(99)]).err().unwrap();
    assert!(
        err.message().contains("[distributed] no CUDA device 99"),
        "{}",
        err.message()
    );
}
